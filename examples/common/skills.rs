//! The `everything` server's skills (`io.modelcontextprotocol/skills`): the fixtures the
//! conformance suite's `sep-2640-skills-*` scenarios discover (through `skills/list` and
//! `resources/list`), each with a subdirectory so `resources/directory/read` has an
//! `inode/directory` child to show, and one skill only the admin role sees. The files are in
//! `examples/common/skills/`; each `body.md` is the part of a `SKILL.md` after its frontmatter,
//! which the engine writes from the fields given here.

use std::time::Duration;

use mcp_proto::{CacheHint, Gate, Skill};
use mcp_server::ServerBuilder;
use serde_json::json;

/// How long clients may reuse what the public skills answer: their content is fixed.
const TTL: Duration = Duration::from_secs(300);

/// Adds the demo skills.
pub(crate) fn skills(builder: ServerBuilder) -> ServerBuilder {
    let md = "text/markdown";
    builder
        .skill(
            Skill::new(
                "skill://acme/billing/refunds",
                "Process customer refund requests per company policy",
                include_str!("skills/refunds/body.md"),
            )
            .field("license", json!("Apache-2.0"))
            .file("examples/email.md", md, include_str!("skills/refunds/examples/email.md"))
            .cache(CacheHint::shared(TTL)),
        )
        .skill(
            Skill::new(
                "skill://pdf-processing",
                "Extract, fill, and assemble PDF documents",
                include_str!("skills/pdf-processing/body.md"),
            )
            .field("metadata", json!({ "version": "2.1.0" }))
            .file("references/FORMS.md", md, include_str!("skills/pdf-processing/references/FORMS.md"))
            .file(
                "scripts/extract.py",
                "text/x-python",
                include_str!("skills/pdf-processing/scripts/extract.py"),
            )
            .file("templates/invoice.md", md, include_str!("skills/pdf-processing/templates/invoice.md"))
            .file(
                "templates/purchase-order.md",
                md,
                include_str!("skills/pdf-processing/templates/purchase-order.md"),
            )
            .file(
                "templates/regional/eu-invoice.md",
                md,
                include_str!("skills/pdf-processing/templates/regional/eu-invoice.md"),
            )
            .cache(CacheHint::shared(TTL)),
        )
        .skill(
            Skill::new(
                "skill://mcp-rs/admin-audit",
                "Review the audit log before changing anything (admins only)",
                include_str!("skills/admin-audit/body.md"),
            )
            .gate(Gate::role("admin")),
        )
}
