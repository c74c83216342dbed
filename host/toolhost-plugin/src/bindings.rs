//! Host bindings generated from `wit/plugin.wit`.
wasmtime::component::bindgen!({
    world: "plugin",
    path: "../../wit",
    exports: { default: async },
});
