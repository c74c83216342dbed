//! Fixture components for the load-time hardening tests ([`super::load`]), built in code
//! like [`super::fixture`] but with room for large definitions, a `definitions` that never
//! returns, and a tool that leaks host handles.
//!
//! | call | behaviour |
//! |---|---|
//! | `handles` (first letter `h`, [`Fixture::Handles`] only) | `wasi:clocks/monotonic-clock.subscribe-duration` in a loop, never dropping the pollable |
//! | anything else | returns its arguments text as the result |

use wasm_encoder::{
    BlockType, CodeSection, ConstExpr, DataSection, EntityType, ExportKind, ExportSection,
    Function, FunctionSection, GlobalSection, GlobalType, ImportSection, MemArg, MemorySection,
    MemoryType, Module, TypeSection, ValType,
};

/// One tool definition: name, description, parameters.
pub(super) type Definition = (String, String, String);

/// What to build.
pub(super) enum Fixture {
    /// `definitions` returns these.
    Definitions(Vec<Definition>),
    /// `definitions` spins forever.
    LoopingDefinitions,
    /// `definitions` returns `handles` and `echo`; `handles` leaks pollables.
    Handles,
}

/// A definition with the description `t`.
pub(super) fn tool(name: &str, parameters: &str) -> Definition {
    (name.to_owned(), "t".to_owned(), parameters.to_owned())
}

/// The component for `fixture`.
pub(super) fn component(fixture: &Fixture) -> Vec<u8> {
    let handles = matches!(fixture, Fixture::Handles);
    let definitions = match fixture {
        Fixture::Definitions(definitions) => definitions.clone(),
        Fixture::LoopingDefinitions => Vec::new(),
        Fixture::Handles => vec![
            tool("handles", super::fixture::EMPTY_SCHEMA),
            tool("echo", super::fixture::EMPTY_SCHEMA),
        ],
    };
    let looping = matches!(fixture, Fixture::LoopingDefinitions);
    encode(core_module(&definitions, looping, handles), handles)
}

/// The subset of WASI the handles fixture imports, and a world adding it to `plugin`.
const HANDLES_WIT: &str = r#"
package test:fixture;

world handles {
    include toolhost:plugin/plugin@0.1.0;
    import wasi:clocks/monotonic-clock@0.2.0;
}

package wasi:io@0.2.0 {
    interface poll {
        resource pollable;
    }
}
package wasi:clocks@0.2.0 {
    interface monotonic-clock {
        use wasi:io/poll@0.2.0.{pollable};
        type duration = u64;
        subscribe-duration: func(when: duration) -> pollable;
    }
}
"#;

fn encode(mut module: Vec<u8>, handles: bool) -> Vec<u8> {
    let mut resolve = wit_parser::Resolve::default();
    // The fixtures target the frozen 0.1.0 world: they exercise the loader's 0.1.0 path.
    let wit = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../wit/legacy/plugin-0.1.0.wit"
    );
    let (plugin, _) = resolve
        .push_path(wit)
        .expect("wit/legacy/plugin-0.1.0.wit parses");
    let world = if handles {
        let package = resolve
            .push_str("handles.wit", HANDLES_WIT)
            .expect("the handles world parses");
        resolve
            .select_world(&[package], Some("handles"))
            .expect("the handles world")
    } else {
        resolve
            .select_world(&[plugin], Some("plugin"))
            .expect("the plugin world")
    };
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
        false,
    )
    .expect("metadata embeds");
    wit_component::ComponentEncoder::default()
        .module(&module)
        .expect("module accepted")
        .validate(true)
        .encode()
        .expect("component encodes")
}

/// Where the data segment starts.
const DATA: u32 = 16;

fn mem(offset: u64, align: u32) -> MemArg {
    MemArg {
        offset,
        align,
        memory_index: 0,
    }
}

fn core_module(definitions: &[Definition], looping: bool, handles: bool) -> Vec<u8> {
    // Data: the strings, the records (ptr, len) x 3 per definition, the definitions
    // return area (ptr, len), then the 12-byte return area of `call`.
    let mut bytes = Vec::new();
    let mut records = Vec::new();
    for (name, description, parameters) in definitions {
        let mut put = |s: &str| {
            let at = DATA + bytes.len() as u32;
            bytes.extend_from_slice(s.as_bytes());
            (at, s.len() as u32)
        };
        records.push([put(name), put(description), put(parameters)]);
    }
    while bytes.len() % 8 != 0 {
        bytes.push(0);
    }
    let array = DATA + bytes.len() as u32;
    for record in &records {
        for (ptr, len) in record {
            bytes.extend_from_slice(&ptr.to_le_bytes());
            bytes.extend_from_slice(&len.to_le_bytes());
        }
    }
    let definitions_ret = DATA + bytes.len() as u32;
    bytes.extend_from_slice(&array.to_le_bytes());
    bytes.extend_from_slice(&(records.len() as u32).to_le_bytes());
    let call_ret = DATA + bytes.len() as u32;
    bytes.extend_from_slice(&[0; 16]);
    let heap = (DATA + bytes.len() as u32).next_multiple_of(8);
    let pages = u64::from(heap / 65536 + 2);

    let mut types = TypeSection::new();
    types.ty().function([ValType::I32; 4], [ValType::I32]); // 0: cabi_realloc
    types.ty().function([], [ValType::I32]); // 1: definitions
    types.ty().function([ValType::I32; 8], [ValType::I32]); // 2: call
    types.ty().function([ValType::I64], [ValType::I32]); // 3: subscribe-duration
    let mut imports = ImportSection::new();
    if handles {
        imports.import(
            "wasi:clocks/monotonic-clock@0.2.0",
            "subscribe-duration",
            EntityType::Function(3),
        );
    }
    // Imported functions come first in the index space.
    let base = u32::from(handles);
    let mut functions = FunctionSection::new();
    for ty in [0, 1, 2] {
        functions.function(ty);
    }
    let mut memories = MemorySection::new();
    memories.memory(MemoryType {
        minimum: pages,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    let mut globals = GlobalSection::new();
    globals.global(
        GlobalType {
            val_type: ValType::I32,
            mutable: true,
            shared: false,
        },
        &ConstExpr::i32_const(heap as i32),
    );
    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    exports.export("cabi_realloc", ExportKind::Func, base);
    exports.export(
        "toolhost:plugin/tools@0.1.0#definitions",
        ExportKind::Func,
        base + 1,
    );
    exports.export(
        "toolhost:plugin/tools@0.1.0#call",
        ExportKind::Func,
        base + 2,
    );

    let mut code = CodeSection::new();
    code.function(&super::fixture::realloc());
    let mut defs = Function::new([]);
    if looping {
        defs.instructions()
            .loop_(BlockType::Empty)
            .br(0)
            .end()
            .unreachable()
            .end();
    } else {
        defs.instructions().i32_const(definitions_ret as i32).end();
    }
    code.function(&defs);
    let mut call = Function::new([]);
    let s = &mut call.instructions();
    if handles {
        // handles: subscribe, drop the handle number (not the resource), forever.
        s.local_get(0)
            .i32_load8_u(mem(0, 0))
            .i32_const(i32::from(b'h'))
            .i32_eq()
            .if_(BlockType::Empty)
            .loop_(BlockType::Empty)
            .i64_const(1_000_000_000)
            .call(0)
            .drop()
            .br(0)
            .end()
            .end();
    }
    // echo: ok(arguments)
    let ret = call_ret as i32;
    s.i32_const(ret).i32_const(0).i32_store8(mem(0, 0));
    s.i32_const(ret).local_get(2).i32_store(mem(4, 2));
    s.i32_const(ret).local_get(3).i32_store(mem(8, 2));
    s.i32_const(ret).end();
    code.function(&call);

    let mut data = DataSection::new();
    data.active(0, &ConstExpr::i32_const(DATA as i32), bytes);

    let mut module = Module::new();
    module.section(&types);
    if handles {
        module.section(&imports);
    }
    module
        .section(&functions)
        .section(&memories)
        .section(&globals)
        .section(&exports)
        .section(&code)
        .section(&data);
    module.finish()
}
