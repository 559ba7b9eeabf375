//! The replay test tools over stdio on tokio; see `mcp_tests::stdio_server`.

use std::process::ExitCode;
use std::time::Duration;

use mcp_tests::stdio_server::{build, exit_code, Options};
use mcp_tokio::BoxFuture;

fn sleep(d: Duration) -> BoxFuture<()> {
    Box::pin(tokio::time::sleep(d))
}

#[tokio::main]
async fn main() -> ExitCode {
    let server = match Options::parse(std::env::args().skip(1)).and_then(|o| build(&o, sleep)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("stdio-tokio: {e}");
            return ExitCode::from(2);
        }
    };
    let end = mcp_tokio::serve_stdio(&server).await;
    eprintln!("stdio-tokio: session ended: {end:?}");
    ExitCode::from(exit_code(&end))
}
