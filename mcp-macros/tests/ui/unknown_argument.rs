/// Adds two integers.
#[mcp_server::tool(readonly)]
async fn add(a: i64, b: i64) -> String {
    (a + b).to_string()
}

fn main() {}
