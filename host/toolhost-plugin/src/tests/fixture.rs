//! Fixture components built in code: a hand-written core module (wasm-encoder) made a
//! component of the `plugin` world by wit-component, so the plugin host's tests need no
//! wasm toolchain.
//!
//! The module's `call` dispatches on the first letter of the tool name:
//!
//! | tool | behaviour |
//! |---|---|
//! | `spin` | `loop {}` (CPU-bound, never yields) |
//! | `grow` | grows memory 1 MiB at a time until refused, then traps (`unreachable`), as a Rust allocation failure does |
//! | `crash` | traps (`unreachable`) |
//! | `deep` | unbounded recursion (stack overflow trap) |
//! | `echo` | returns its arguments text as the result |
//! | `bad` | returns `{nope` (not JSON) |
//! | `fail` | returns the guest error `failed("nope")` |
//! | `invalid` | returns the guest error `invalid-arguments("bad args")` |
//! | anything else | `failed("no such tool")` |
//!
//! `definitions` returns whatever list the fixture was built with.

use wasm_encoder::{
    BlockType, CodeSection, ConstExpr, DataSection, ExportKind, ExportSection, Function,
    FunctionSection, GlobalSection, GlobalType, MemArg, MemorySection, MemoryType, Module,
    TypeSection, ValType,
};

/// The tools the standard fixture declares.
pub(super) const TOOLS: &[&str] = &[
    "spin", "grow", "crash", "deep", "echo", "bad", "fail", "invalid",
];

/// An object schema with no properties.
pub(super) const EMPTY_SCHEMA: &str = r#"{"type":"object","properties":{}}"#;

/// The standard fixture: every tool of [`TOOLS`] with an empty object schema.
pub(super) fn standard() -> Vec<u8> {
    let definitions: Vec<(&str, &str)> = TOOLS.iter().map(|name| (*name, EMPTY_SCHEMA)).collect();
    component(&definitions)
}

/// A fixture whose `definitions` returns `definitions` as (name, parameters) pairs,
/// each with the description `t`.
pub(super) fn component(definitions: &[(&str, &str)]) -> Vec<u8> {
    encode(core_module(definitions, false))
}

/// A fixture whose `definitions` returns a list pointing outside its memory, so the host
/// cannot read the answer.
pub(super) fn broken_definitions() -> Vec<u8> {
    encode(core_module(&[("x", EMPTY_SCHEMA)], true))
}

fn encode(mut module: Vec<u8>) -> Vec<u8> {
    let mut resolve = wit_parser::Resolve::default();
    // The fixtures target the frozen 0.1.0 world: they exercise the loader's 0.1.0 path.
    let wit = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../wit/legacy/plugin-0.1.0.wit"
    );
    let (package, _) = resolve
        .push_path(wit)
        .expect("wit/legacy/plugin-0.1.0.wit parses");
    let world = resolve
        .select_world(&[package], Some("plugin"))
        .expect("the plugin world");
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
/// The 16-byte return area of `call`.
const CALL_RET: u32 = 8192;
/// Where the bump heap starts.
const HEAP: u32 = 16384;

fn mem(offset: u64, align: u32) -> MemArg {
    MemArg {
        offset,
        align,
        memory_index: 0,
    }
}

/// Lays out the static data: strings, the definitions array and its return area.
/// Returns the bytes (placed at [`DATA`]), the address of the definitions return area,
/// and the address/length of the `{nope`, `nope`, `bad args` and `no such tool` strings.
struct Data {
    bytes: Vec<u8>,
    definitions_ret: u32,
    strings: Vec<(u32, u32)>,
}

fn layout(definitions: &[(&str, &str)], broken: bool) -> Data {
    let mut bytes = Vec::new();
    let put = |bytes: &mut Vec<u8>, s: &[u8]| -> (u32, u32) {
        let at = DATA + bytes.len() as u32;
        bytes.extend_from_slice(s);
        (at, s.len() as u32)
    };
    let strings = ["{nope", "nope", "bad args", "no such tool"]
        .iter()
        .map(|s| put(&mut bytes, s.as_bytes()))
        .collect();
    let mut records = Vec::new();
    for (name, parameters) in definitions {
        let name = put(&mut bytes, name.as_bytes());
        let description = put(&mut bytes, b"t");
        let parameters = put(&mut bytes, parameters.as_bytes());
        records.push([name, description, parameters]);
    }
    while bytes.len() % 8 != 0 {
        bytes.push(0);
    }
    let array = if broken {
        0x7fff_0000
    } else {
        DATA + bytes.len() as u32
    };
    for record in &records {
        for (ptr, len) in record {
            bytes.extend_from_slice(&ptr.to_le_bytes());
            bytes.extend_from_slice(&len.to_le_bytes());
        }
    }
    let definitions_ret = DATA + bytes.len() as u32;
    bytes.extend_from_slice(&array.to_le_bytes());
    bytes.extend_from_slice(&(records.len() as u32).to_le_bytes());
    assert!(
        DATA + (bytes.len() as u32) < CALL_RET,
        "fixture data too large"
    );
    Data {
        bytes,
        definitions_ret,
        strings,
    }
}

fn core_module(definitions: &[(&str, &str)], broken: bool) -> Vec<u8> {
    let data = layout(definitions, broken);
    let mut types = TypeSection::new();
    types.ty().function([ValType::I32; 4], [ValType::I32]); // 0: cabi_realloc
    types.ty().function([], [ValType::I32]); // 1: definitions
    types.ty().function([ValType::I32; 8], [ValType::I32]); // 2: call
    types.ty().function([], []); // 3: rec
    let mut functions = FunctionSection::new();
    for ty in [0, 1, 2, 3] {
        functions.function(ty);
    }
    let mut memories = MemorySection::new();
    memories.memory(MemoryType {
        minimum: 1,
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
        &ConstExpr::i32_const(HEAP as i32),
    );
    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    exports.export("cabi_realloc", ExportKind::Func, 0);
    exports.export(
        "toolhost:plugin/tools@0.1.0#definitions",
        ExportKind::Func,
        1,
    );
    exports.export("toolhost:plugin/tools@0.1.0#call", ExportKind::Func, 2);

    let mut code = CodeSection::new();
    code.function(&realloc());
    let mut defs = Function::new([]);
    defs.instructions()
        .i32_const(data.definitions_ret as i32)
        .end();
    code.function(&defs);
    code.function(&call(&data.strings));
    let mut rec = Function::new([]);
    rec.instructions().call(3).end();
    code.function(&rec);

    let mut data_section = DataSection::new();
    data_section.active(0, &ConstExpr::i32_const(DATA as i32), data.bytes);

    let mut module = Module::new();
    module
        .section(&types)
        .section(&functions)
        .section(&memories)
        .section(&globals)
        .section(&exports)
        .section(&code)
        .section(&data_section);
    module.finish()
}

/// `cabi_realloc(old, old_size, align, new_size)`: a bump allocator (8-aligned) that
/// grows memory as needed and traps when it cannot.
pub(super) fn realloc() -> Function {
    let mut f = Function::new([(1, ValType::I32)]); // local 4: the new pointer
    f.instructions()
        // ptr = (heap + 7) & !7
        .global_get(0)
        .i32_const(7)
        .i32_add()
        .i32_const(-8)
        .i32_and()
        .local_set(4)
        // heap = ptr + new_size
        .local_get(4)
        .local_get(3)
        .i32_add()
        .global_set(0)
        // while heap > memory.size * 64 KiB: grow by a page, trap if refused
        .block(BlockType::Empty)
        .loop_(BlockType::Empty)
        .global_get(0)
        .memory_size(0)
        .i32_const(16)
        .i32_shl()
        .i32_le_u()
        .br_if(1)
        .i32_const(1)
        .memory_grow(0)
        .i32_const(-1)
        .i32_eq()
        .if_(BlockType::Empty)
        .unreachable()
        .end()
        .br(0)
        .end()
        .end()
        .local_get(4)
        .end();
    f
}

/// `call(name_ptr, name_len, args_ptr, args_len, sid_ptr, sid_len, tid_ptr, tid_len)`.
fn call(strings: &[(u32, u32)]) -> Function {
    let (bad, nope, bad_args, no_such) = (strings[0], strings[1], strings[2], strings[3]);
    let mut f = Function::new([(1, ValType::I32)]); // local 8: the first letter
    let s = &mut f.instructions();
    s.local_get(0).i32_load8_u(mem(0, 0)).local_set(8);
    let when = |s: &mut wasm_encoder::InstructionSink<'_>, letter: u8| {
        s.local_get(8)
            .i32_const(i32::from(letter))
            .i32_eq()
            .if_(BlockType::Empty);
    };
    // spin: loop {}
    when(s, b's');
    s.loop_(BlockType::Empty).br(0).end().end();
    // grow: grow 16 pages at a time until refused, then trap
    when(s, b'g');
    s.loop_(BlockType::Empty)
        .i32_const(16)
        .memory_grow(0)
        .i32_const(-1)
        .i32_eq()
        .if_(BlockType::Empty)
        .unreachable()
        .end()
        .br(0)
        .end()
        .end();
    // crash
    when(s, b'c');
    s.unreachable().end();
    // deep: unbounded recursion
    when(s, b'd');
    s.call(3).end();
    // echo: ok(arguments)
    when(s, b'e');
    ok(s, None);
    s.end();
    // bad: ok("{nope")
    when(s, b'b');
    ok(s, Some(bad));
    s.end();
    // fail / invalid: err(failed / invalid-arguments)
    when(s, b'f');
    err(s, 1, nope);
    s.end();
    when(s, b'i');
    err(s, 0, bad_args);
    s.end();
    err(s, 1, no_such);
    s.end();
    f
}

/// Writes `ok(string)` to the return area and returns it; `None` echoes the arguments.
fn ok(s: &mut wasm_encoder::InstructionSink<'_>, text: Option<(u32, u32)>) {
    let ret = CALL_RET as i32;
    s.i32_const(ret).i32_const(0).i32_store8(mem(0, 0));
    match text {
        Some((ptr, len)) => {
            s.i32_const(ret).i32_const(ptr as i32).i32_store(mem(4, 2));
            s.i32_const(ret).i32_const(len as i32).i32_store(mem(8, 2));
        }
        None => {
            s.i32_const(ret).local_get(2).i32_store(mem(4, 2));
            s.i32_const(ret).local_get(3).i32_store(mem(8, 2));
        }
    }
    s.i32_const(ret).return_();
}

/// Writes `err(tool-error case(text))` to the return area and returns it.
fn err(s: &mut wasm_encoder::InstructionSink<'_>, case: i32, (ptr, len): (u32, u32)) {
    let ret = CALL_RET as i32;
    s.i32_const(ret).i32_const(1).i32_store8(mem(0, 0));
    s.i32_const(ret).i32_const(case).i32_store8(mem(4, 0));
    s.i32_const(ret).i32_const(ptr as i32).i32_store(mem(8, 2));
    s.i32_const(ret).i32_const(len as i32).i32_store(mem(12, 2));
    s.i32_const(ret).return_();
}

/// Writes the fixture components into the fuzz seed corpus (`fuzz/seeds/component_bytes`):
/// small components (a few KiB) the `component_bytes` fuzz target mutates. Run it after
/// changing the fixture or wit/:
/// `cargo test -p toolhost-plugin write_fuzz_seeds -- --ignored`.
#[test]
#[ignore = "writes into the repo; run by hand to refresh the fuzz seeds"]
fn write_fuzz_seeds() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/seeds/component_bytes"
    );
    std::fs::create_dir_all(dir).unwrap();
    let one = [("echo", EMPTY_SCHEMA)];
    for (name, bytes) in [
        ("standard.wasm", standard()),
        ("echo.wasm", component(&one)),
        ("broken_definitions.wasm", broken_definitions()),
    ] {
        std::fs::write(format!("{dir}/{name}"), bytes).unwrap();
    }
}
