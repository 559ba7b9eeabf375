/// Forgets its text.
#[mcp_server::tool]
async fn forget(text: String) {
    drop(text);
}

fn main() {}
