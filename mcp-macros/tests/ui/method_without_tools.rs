struct Counter;

impl Counter {
    /// Reads the counter.
    #[mcp_server::tool]
    async fn read(&self) -> String {
        String::new()
    }
}

fn main() {}
