//! Host bindings generated from `wit/plugin.wit`.
wasmtime::component::bindgen!({
    world: "plugin",
    path: "../../wit",
    exports: { default: async },
    // Storage work runs on the blocking pool and the guest awaits it, so a slow storage
    // holds no async worker and the call's deadline still fires (see host/files.rs).
    // `log` stays synchronous: it only formats a line within the plugin's rate limit.
    imports: { "toolhost:plugin/files": async },
});
