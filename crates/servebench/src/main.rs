//! The `servebench` binary: everything lives in the library; see [`servebench::main_entry`].

fn main() -> std::process::ExitCode {
    servebench::main_entry(std::env::args_os())
}
