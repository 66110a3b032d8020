use std::process::ExitCode;

fn main() -> ExitCode {
    memloop::cli::main()
}
