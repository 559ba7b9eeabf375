//! The replay test tools over stdio on smol; see `mcp_tests::stdio_server`.

use std::process::ExitCode;
use std::time::Duration;

use mcp_smol::BoxFuture;
use mcp_tests::stdio_server::{build, exit_code, Options};

fn sleep(d: Duration) -> BoxFuture<()> {
    Box::pin(async move {
        smol::Timer::after(d).await;
    })
}

fn main() -> ExitCode {
    let server = match Options::parse(std::env::args().skip(1)).and_then(|o| build(&o, sleep)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("stdio-smol: {e}");
            return ExitCode::from(2);
        }
    };
    let end = smol::block_on(mcp_smol::serve_stdio(&server));
    eprintln!("stdio-smol: session ended: {end:?}");
    ExitCode::from(exit_code(&end))
}
