//! What the two bench examples share: their command line. `bench [--http ADDR]` serves the
//! everything example's `--bench` catalogue (`echo` and `add` with ../shared/bench's
//! definitions) on stdio, or over Streamable HTTP on ADDR.
//!
//! Why binaries of their own: each peer of ../shared/bench is a binary with that catalogue and
//! nothing else, while the everything example also links TLS, OAuth, Redis and the demo's
//! fixtures (6.0 MB of code on x86-64 against 3.5 MB for rmcp's peer). A server's resident set
//! under load is mostly the code it has touched, so only a binary built like the peers compares
//! like with like.

/// `Some(ADDR)` for `--http ADDR`, `None` for stdio; exits with the usage on anything else.
pub(crate) fn http_addr(name: &str) -> Option<String> {
    let mut args = std::env::args().skip(1);
    match (args.next().as_deref(), args.next(), args.next()) {
        (None, _, _) => None,
        (Some("--http"), Some(addr), None) => Some(addr),
        _ => {
            eprintln!("usage: {name} [--http ADDR]");
            std::process::exit(2)
        }
    }
}

/// Tells bench/run.sh and the tests where the server listens, in the everything example's words:
/// `listening on http://HOST:PORT/mcp` on stderr.
pub(crate) fn listening(addr: std::net::SocketAddr) {
    eprintln!("listening on http://{addr}/mcp");
}

/// Exits 1 with why when serving failed.
pub(crate) fn exit_on_error(name: &str, served: std::io::Result<()>) {
    if let Err(e) = served {
        eprintln!("{name}: {e}");
        std::process::exit(1)
    }
}
