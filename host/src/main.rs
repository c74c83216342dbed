//! The `host` binary; everything is in [`toolhost::cli`].

fn main() -> std::process::ExitCode {
    toolhost::cli::main()
}
