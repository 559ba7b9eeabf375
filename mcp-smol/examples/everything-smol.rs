//! The demo server on smol: `cargo run --release -p mcp-smol --example everything-smol`.
//! The server itself is defined once, in examples/common/everything.rs, for both shims.

#[path = "../../examples/common/everything.rs"]
mod everything;

fn main() {
    let args = everything::parse_args().unwrap_or_else(|msg| {
        eprintln!("{msg}");
        std::process::exit(2)
    });
    everything::init_logging();
    // Everything on this thread (see `mcp_smol::block_on` for why, and what it measured).
    mcp_smol::block_on(run(args))
}

async fn run(args: everything::Args) {
    let server = everything::build_replica(&args).await;
    // SIGINT or SIGTERM (unix): refuse new work, let calls in flight finish (for up to the
    // budget) and answer them, then exit 0.
    let stop =
        smol::spawn(mcp_smol::shutdown_on_signal(server.clone(), everything::shutdown_budget(&server)));
    if let Some(addr) = &args.http {
        let served = async {
            let listener = smol::net::TcpListener::bind(addr.as_str()).await?;
            everything::announce(listener.local_addr()?, &args);
            // Returns once the shutdown began; `stop` ends when it is over.
            let http = everything::http_config(&args);
            #[cfg(feature = "tls")]
            if let Some(tls) = everything::tls_config(&args) {
                mcp_smol::serve_https(listener, server.clone(), http.clone(), tls).await?;
            } else {
                mcp_smol::serve_http(listener, server.clone(), http).await?;
            }
            #[cfg(not(feature = "tls"))]
            mcp_smol::serve_http(listener, server.clone(), http).await?;
            stop.await
        }
        .await;
        match served {
            Ok(report) => everything::stopped(report.cancelled),
            Err(e) => {
                tracing::error!(%e, "HTTP server failed");
                eprintln!("everything-smol: {addr}: {e}");
                std::process::exit(1)
            }
        }
        return;
    }
    // The session ends by itself at end of input, or once a signal's shutdown answered its calls.
    match mcp_smol::serve_stdio_as(&server, args.caller()).await {
        Ok(end) => tracing::info!(?end, "stdio session ended"),
        Err(e) => {
            tracing::error!(%e, "stdio session failed");
            std::process::exit(1)
        }
    }
}
