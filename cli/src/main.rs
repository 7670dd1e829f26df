//! The `cptsim` binary; the program is the library's [`cptsim::main`].

fn main() -> std::process::ExitCode {
    cptsim::main()
}
