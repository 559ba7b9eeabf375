/// Echoes its text.
#[mcp_server::tool]
async fn echo(text: &str) -> String {
    text.to_owned()
}

fn main() {}
