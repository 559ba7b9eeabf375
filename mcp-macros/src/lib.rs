//! `#[tool]` and `#[tools]`: MCP tools from plain functions and methods.
//!
//! Use them through the `macros` feature of the crate you depend on, as `#[mcp_tokio::tool]`,
//! `#[mcp_smol::tool]` or `#[mcp_server::tool]`; this crate is not meant to be named directly.
//!
//! The builder ([`ServerBuilder`]) stays the reference: a macro writes the builder calls one
//! would write by hand and nothing else. `#[tool]` on `async fn add` keeps the function as it is
//! and generates beside it `fn add_tool(builder: ServerBuilder) -> ServerBuilder`, a
//! registration function that [`ServerBuilder::register`] applies:
//!
//! - the tool's name is the function's, its description the doc comment;
//! - the parameters become the fields of one generated arguments struct deriving
//!   `serde::Deserialize` and `schemars::JsonSchema`, whose schema is the `inputSchema` (a
//!   parameter's doc comment is its property's `description`; its `#[serde(..)]` and
//!   `#[schemars(..)]` attributes go to the field too);
//! - one parameter may be the call itself (`ToolCall`), or its `RequestContext` (by value or
//!   by reference), recognised by the type's last path segment;
//! - the return type is anything that implements `IntoToolResult`; `Json<T>` declares `T`'s
//!   schema as the `outputSchema`, as the builder does;
//! - the registration is [`ServerBuilder::typed_tool_with`] (or
//!   [`blocking_typed_tool_with`][blocking_with] for a `blocking`
//!   tool), given `typed_tool::<Args>(name, description)` and the `Tool` setters the attribute
//!   arguments ask for.
//!
//! `#[tools]` on an `impl` block does the same for its methods marked `#[tool]`, and generates
//! `fn tools(self) -> impl FnOnce(ServerBuilder) -> ServerBuilder`: the value is put in an
//! `Arc` that every handler shares, so the methods take `&self`.
//!
//! # Paths
//!
//! The generated code names items through a hidden module of the crate the macro was used
//! through (`::mcp_tokio::__macros`, `::mcp_smol::__macros` or `::mcp_server::__macros`),
//! never through a crate the user may not depend on: each of the three crates re-exports its
//! own entry point of this crate (`tool_tokio`, `tool_smol`, or `tool` itself) under the name
//! `tool`. A crate that renames its dependency, or re-exports one of them, says where it is with
//! `crate = path` (`#[tool(crate = my_prelude::mcp)]`).
//!
//! [`ServerBuilder`]: https://docs.rs/mcp-server/latest/mcp_server/struct.ServerBuilder.html
//! [`ServerBuilder::register`]: https://docs.rs/mcp-server/latest/mcp_server/struct.ServerBuilder.html#method.register
//! [`ServerBuilder::typed_tool_with`]: https://docs.rs/mcp-server/latest/mcp_server/struct.ServerBuilder.html#method.typed_tool_with
//! [blocking_with]: https://docs.rs/mcp-server/latest/mcp_server/struct.ServerBuilder.html#method.blocking_typed_tool_with

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::parse::{Parse, ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{
    Attribute, Error, Expr, FnArg, Ident, ImplItem, ItemFn, ItemImpl, LitBool, LitStr, Meta, Pat, Path,
    ReturnType, Signature, Token, Type, Visibility,
};

/// Makes an MCP tool of an async function (or, with `blocking`, a plain one), and generates
/// beside it `fn <name>_tool(builder: ServerBuilder) -> ServerBuilder`, which
/// `ServerBuilder::register` applies.
///
/// ```text
/// /// Adds two integers.
/// #[mcp_tokio::tool(read_only, idempotent)]
/// async fn add(
///     /// The first term.
///     a: i64,
///     /// The second term.
///     b: i64,
/// ) -> Json<Sum> {
///     Json(Sum { sum: a + b })
/// }
///
/// let server = Server::builder("calc", "1.0.0").register(add_tool).build()?;
/// ```
///
/// Arguments, all optional:
///
/// - `name = "..."`: the tool's name (default: the function's);
/// - `description = "..."`: its description (default: the doc comment, which then must exist);
/// - `title = "..."`: its display title (`Tool::title`);
/// - `read_only`, `destructive`, `idempotent`, `open_world` (each alone or `= true`/`= false`):
///   the `readOnlyHint`, `destructiveHint`, `idempotentHint` and `openWorldHint` annotations;
/// - `gate = <expr>`: a `Gate` (`Tool::gate`); `scopes = <expr>`: the OAuth scopes
///   (`Tool::scopes`);
/// - `task_support = Optional` (or `Required`, `Never`): `Tool::task_support`;
///   `task_started_by_handler`: `Tool::task_started_by_handler`;
/// - `app = "ui://..."`, with `visibility = Model` (or `App`, `ModelAndApp`, the default):
///   `Tool::ui`;
/// - `blocking`: the function is not async and each call runs on the blocking pool
///   (`ServerBuilder::blocking_typed_tool_with`);
/// - `crate = <path>`: where the `mcp-server` API is (see the crate docs).
///
/// On a method, or any function of an `impl` block, put [`tools`] on the block instead: the
/// generated code must reach the function through `Self`, which only the block's macro sees.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand_fn(attr, item, quote!(::mcp_server))
}

/// [`tool`], naming the `mcp-server` API through `::mcp_tokio`; `mcp_tokio::tool` is this.
#[proc_macro_attribute]
pub fn tool_tokio(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand_fn(attr, item, quote!(::mcp_tokio))
}

/// [`tool`], naming the `mcp-server` API through `::mcp_smol`; `mcp_smol::tool` is this.
#[proc_macro_attribute]
pub fn tool_smol(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand_fn(attr, item, quote!(::mcp_smol))
}

/// Makes MCP tools of the methods of an `impl` block marked `#[tool(...)]` (with the arguments
/// of [`tool`]), and adds to the block `fn tools(self) -> impl FnOnce(ServerBuilder) ->
/// ServerBuilder`, as visible as the first tool method, which `ServerBuilder::register`
/// applies. The value goes into an `Arc` shared by every handler, so a tool method takes
/// `&self` (or no receiver at all); the type must be `Send + Sync + 'static`.
///
/// ```text
/// #[mcp_tokio::tools]
/// impl Counter {
///     /// Adds `by` to the counter and returns the new count.
///     #[tool]
///     async fn bump(&self, by: u64) -> String {
///         (self.count.fetch_add(by, Ordering::Relaxed) + by).to_string()
///     }
/// }
///
/// let server = Server::builder("count", "1.0.0").register(counter.tools()).build()?;
/// ```
///
/// Its only argument is `crate = <path>`, as for [`tool`]; each method's `#[tool]` may give its
/// own too.
#[proc_macro_attribute]
pub fn tools(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand_impl(attr, item, quote!(::mcp_server))
}

/// [`tools`], naming the `mcp-server` API through `::mcp_tokio`; `mcp_tokio::tools` is this.
#[proc_macro_attribute]
pub fn tools_tokio(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand_impl(attr, item, quote!(::mcp_tokio))
}

/// [`tools`], naming the `mcp-server` API through `::mcp_smol`; `mcp_smol::tools` is this.
#[proc_macro_attribute]
pub fn tools_smol(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand_impl(attr, item, quote!(::mcp_smol))
}

const ARGUMENTS: &str = "name, description, title, read_only, destructive, idempotent, open_world, \
                         gate, scopes, task_support, task_started_by_handler, app, visibility, \
                         blocking, crate";

/// The arguments of one `#[tool(...)]`.
#[derive(Default)]
struct Options {
    name: Option<LitStr>,
    description: Option<LitStr>,
    title: Option<LitStr>,
    /// The annotations set, as (wire name, value), in the order given.
    hints: Vec<(&'static str, LitBool)>,
    gate: Option<Expr>,
    scopes: Option<Expr>,
    task_support: Option<Ident>,
    task_started_by_handler: bool,
    app: Option<LitStr>,
    visibility: Option<Ident>,
    blocking: Option<Span>,
    krate: Option<Path>,
}

impl Parse for Options {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut o = Options::default();
        let mut seen: Vec<String> = Vec::new();
        for meta in Punctuated::<Meta, Token![,]>::parse_terminated(input)? {
            let path = meta.path();
            let key = if path.is_ident("crate") {
                "crate".to_owned()
            } else {
                match path.get_ident() {
                    Some(i) => i.to_string(),
                    None => {
                        return Err(Error::new_spanned(path, unknown(&path.to_token_stream().to_string())))
                    }
                }
            };
            if seen.contains(&key) {
                return Err(Error::new_spanned(path, format!("`{key}` is given twice; keep one")));
            }
            seen.push(key.clone());
            match key.as_str() {
                "name" => o.name = Some(string(&meta)?),
                "description" => o.description = Some(string(&meta)?),
                "title" => o.title = Some(string(&meta)?),
                "read_only" => o.hints.push(("readOnlyHint", flag(&meta)?)),
                "destructive" => o.hints.push(("destructiveHint", flag(&meta)?)),
                "idempotent" => o.hints.push(("idempotentHint", flag(&meta)?)),
                "open_world" => o.hints.push(("openWorldHint", flag(&meta)?)),
                "gate" => o.gate = Some(expr(&meta, "a `Gate`, such as `gate = Gate::role(\"admin\")`")?),
                "scopes" => o.scopes = Some(expr(&meta, "the scopes, such as `scopes = [\"files:read\"]`")?),
                "task_support" => {
                    o.task_support =
                        Some(variant(&meta, &["Never", "Optional", "Required"], "task_support = Optional")?)
                }
                "task_started_by_handler" => o.task_started_by_handler = bare(&meta)?,
                "app" => o.app = Some(string(&meta)?),
                "visibility" => {
                    o.visibility =
                        Some(variant(&meta, &["ModelAndApp", "Model", "App"], "visibility = Model")?)
                }
                "blocking" => {
                    bare(&meta)?;
                    o.blocking = Some(meta.span());
                }
                "crate" => o.krate = Some(path_value(&meta)?),
                other => return Err(Error::new_spanned(path, unknown(other))),
            }
        }
        if let (Some(v), None) = (&o.visibility, &o.app) {
            return Err(Error::new_spanned(
                v,
                "`visibility` is the visibility of an app link: add `app = \"ui://...\"`, or remove it",
            ));
        }
        if let (true, None) = (o.task_started_by_handler, &o.task_support) {
            return Err(Error::new(
                input.span(),
                "`task_started_by_handler` needs a task-capable tool: add `task_support = Optional` \
                 (or `Required`)",
            ));
        }
        Ok(o)
    }
}

fn unknown(key: &str) -> String {
    format!("unknown argument `{key}` of #[tool]; the arguments are: {ARGUMENTS}")
}

fn name_of(meta: &Meta) -> String {
    meta.path().to_token_stream().to_string()
}

fn value(meta: &Meta, example: &str) -> syn::Result<Expr> {
    match meta {
        Meta::NameValue(nv) => Ok(nv.value.clone()),
        _ => Err(Error::new_spanned(meta, format!("`{}` takes a value: write `{example}`", name_of(meta)))),
    }
}

fn string(meta: &Meta) -> syn::Result<LitStr> {
    let example = format!("{} = \"...\"", name_of(meta));
    match value(meta, &example)? {
        Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Ok(s),
        other => Err(Error::new_spanned(
            other,
            format!("`{}` takes a string literal: write `{example}`", name_of(meta)),
        )),
    }
}

fn expr(meta: &Meta, what: &str) -> syn::Result<Expr> {
    value(meta, &format!("{} = ...", name_of(meta)))
        .map_err(|_| Error::new_spanned(meta, format!("`{}` takes {what}", name_of(meta))))
}

/// A hint: `read_only` alone is `true`, or `read_only = false`.
fn flag(meta: &Meta) -> syn::Result<LitBool> {
    match meta {
        Meta::Path(p) => Ok(LitBool::new(true, p.span())),
        Meta::NameValue(nv) => match &nv.value {
            Expr::Lit(syn::ExprLit { lit: syn::Lit::Bool(b), .. }) => Ok(b.clone()),
            other => Err(Error::new_spanned(
                other,
                format!("`{}` is `true` alone, or `= true` or `= false`", name_of(meta)),
            )),
        },
        Meta::List(_) => {
            Err(Error::new_spanned(meta, format!("write `{0}` or `{0} = false`", name_of(meta))))
        }
    }
}

/// A flag that takes no value.
fn bare(meta: &Meta) -> syn::Result<bool> {
    match meta {
        Meta::Path(_) => Ok(true),
        _ => Err(Error::new_spanned(meta, format!("`{0}` takes no value: write `{0}` alone", name_of(meta)))),
    }
}

fn variant(meta: &Meta, names: &[&str], example: &str) -> syn::Result<Ident> {
    let wrong = || {
        Error::new_spanned(
            meta,
            format!("`{}` is one of {}: write `{example}`", name_of(meta), names.join(", ")),
        )
    };
    match value(meta, example).map_err(|_| wrong())? {
        Expr::Path(p) => match p.path.get_ident() {
            Some(i) if names.contains(&i.to_string().as_str()) => Ok(i.clone()),
            _ => Err(wrong()),
        },
        _ => Err(wrong()),
    }
}

fn path_value(meta: &Meta) -> syn::Result<Path> {
    match value(meta, "crate = mcp_tokio")? {
        Expr::Path(p) => Ok(p.path),
        Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => s.parse(),
        other => Err(Error::new_spanned(other, "`crate` takes a path: write `crate = mcp_tokio`")),
    }
}

/// How the handler reaches the function: a free function, or a method through the shared
/// `Arc` named `this`.
enum Callee {
    Free,
    Method { receiver: bool },
}

/// What the handler passes for the context parameter.
enum Context {
    Call,
    Ctx,
    CtxRef,
    CallRef,
}

fn expand_fn(attr: TokenStream, item: TokenStream, default_crate: TokenStream2) -> TokenStream {
    let result = Options::parse.parse(attr).and_then(|options| {
        let mut f: ItemFn = syn::parse(item)?;
        if let Some(FnArg::Receiver(r)) = f.sig.inputs.first() {
            return Err(Error::new_spanned(
                r,
                "a method becomes a tool through its impl block: put `#[tools]` on the `impl` and \
                 keep `#[tool]` on the method",
            ));
        }
        let krate = options.krate.clone().map(|p| p.into_token_stream()).unwrap_or(default_crate);
        let registration = registration(&options, &mut f.sig, &f.attrs, &krate, Callee::Free)?;
        let vis = &f.vis;
        let register = format_ident!("{}_tool", f.sig.ident.to_string().trim_start_matches("r#"));
        let doc = format!(
            "Registers the tool made of [`{0}`] with a builder (`ServerBuilder::register({1})`); \
             generated by `#[tool]`.",
            f.sig.ident, register
        );
        let builder = quote!(#krate::__macros::ServerBuilder);
        Ok(quote! {
            #f

            #[doc = #doc]
            #vis fn #register(builder: #builder) -> #builder {
                #registration
            }
        })
    });
    result.unwrap_or_else(Error::into_compile_error).into()
}

fn expand_impl(attr: TokenStream, item: TokenStream, default_crate: TokenStream2) -> TokenStream {
    let result = (|| {
        let mut block_krate = None;
        for meta in Punctuated::<Meta, Token![,]>::parse_terminated.parse(attr)? {
            if !meta.path().is_ident("crate") {
                return Err(Error::new_spanned(
                    meta.path(),
                    "#[tools] takes only `crate = <path>`: put the other arguments on each method's \
                     #[tool(...)]",
                ));
            }
            block_krate = Some(path_value(&meta)?);
        }
        let mut block: ItemImpl = syn::parse(item)?;
        if let Some(t) = &block.trait_ {
            return Err(Error::new_spanned(
                &t.1,
                "#[tools] goes on an inherent impl block (`impl MyType { ... }`), not a trait impl",
            ));
        }
        if !block.generics.params.is_empty() {
            return Err(Error::new_spanned(
                &block.generics,
                "#[tools] cannot serve a generic impl block: each tool needs one concrete schema; \
                 write the block for a concrete type (`impl Tools<MyStore> { ... }`)",
            ));
        }
        let mut registrations = Vec::new();
        let mut first_vis: Option<Visibility> = None;
        let mut krate_used = None;
        for member in &mut block.items {
            let ImplItem::Fn(method) = member else { continue };
            let Some(at) = method.attrs.iter().position(is_tool_attr) else { continue };
            let attr = method.attrs.remove(at);
            let options = match &attr.meta {
                Meta::Path(_) => Options::default(),
                _ => attr.parse_args_with(Options::parse)?,
            };
            let krate = options
                .krate
                .clone()
                .or_else(|| block_krate.clone())
                .map(|p| p.into_token_stream())
                .unwrap_or_else(|| default_crate.clone());
            let receiver = match method.sig.inputs.first() {
                Some(FnArg::Receiver(r)) => {
                    if r.reference.is_none() || r.colon_token.is_some() {
                        return Err(Error::new_spanned(
                            r,
                            "a tool method takes `&self`: one value serves every call, shared in an \
                             `Arc`; clone what a call must own inside the method",
                        ));
                    }
                    if r.mutability.is_some() {
                        return Err(Error::new_spanned(
                            r,
                            "a tool method takes `&self`, not `&mut self`: calls run concurrently; \
                             keep mutable state behind a `Mutex` or an atomic",
                        ));
                    }
                    true
                }
                _ => false,
            };
            let registration =
                registration(&options, &mut method.sig, &method.attrs, &krate, Callee::Method { receiver })?;
            first_vis.get_or_insert_with(|| method.vis.clone());
            krate_used.get_or_insert_with(|| krate.clone());
            registrations.push(registration);
        }
        let (Some(vis), Some(krate)) = (first_vis, krate_used) else {
            return Err(Error::new(
                Span::call_site(),
                "#[tools] found no method marked #[tool]: mark each method to serve with #[tool]",
            ));
        };
        let builder = quote!(#krate::__macros::ServerBuilder);
        let ty = &block.self_ty;
        let made = quote! {
            /// Registers this value's tool methods with a builder
            /// (`ServerBuilder::register(value.tools())`); generated by `#[tools]`.
            #vis fn tools(self) -> impl ::core::ops::FnOnce(#builder) -> #builder
            where
                Self: ::core::marker::Send + ::core::marker::Sync + 'static,
            {
                move |builder: #builder| {
                    let this: ::std::sync::Arc<#ty> = ::std::sync::Arc::new(self);
                    #( let builder = { #registrations }; )*
                    let _ = this;
                    builder
                }
            }
        };
        block.items.push(ImplItem::Verbatim(made));
        Ok(block.into_token_stream())
    })();
    result.unwrap_or_else(Error::into_compile_error).into()
}

fn is_tool_attr(attr: &Attribute) -> bool {
    attr.path().segments.last().is_some_and(|s| s.ident == "tool")
}

/// The doc comment's text, each line without the one space `///` leaves, trimmed.
fn doc_text(attrs: &[Attribute]) -> Option<String> {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|l| l.strip_prefix(' ').unwrap_or(&l).trim_end().to_owned())
        .collect();
    let text = lines.join("\n").trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// The type's last path segment, looking through one reference.
fn context_of(ty: &Type) -> Option<Context> {
    let (ty, by_ref) = match ty {
        Type::Reference(r) => (&*r.elem, true),
        other => (other, false),
    };
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    match (last.ident.to_string().as_str(), by_ref) {
        ("ToolCall", false) => Some(Context::Call),
        ("ToolCall", true) => Some(Context::CallRef),
        ("RequestContext", false) => Some(Context::Ctx),
        ("RequestContext", true) => Some(Context::CtxRef),
        _ => None,
    }
}

/// The body of a registration: the arguments struct, the `Tool` and the builder call, given
/// `builder` (and `this`, for a method). Strips from `sig` the parameter attributes it moved to
/// the struct.
fn registration(
    options: &Options,
    sig: &mut Signature,
    attrs: &[Attribute],
    krate: &TokenStream2,
    callee: Callee,
) -> syn::Result<TokenStream2> {
    let fn_name = sig.ident.to_string().trim_start_matches("r#").to_owned();
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(Error::new_spanned(
            &sig.generics,
            format!(
                "a tool cannot be generic: its input schema is fixed when it is registered; give \
                 `{fn_name}` concrete parameter types"
            ),
        ));
    }
    let blocking = options.blocking.is_some();
    match (sig.asyncness.is_some(), blocking) {
        (false, false) => {
            return Err(Error::new_spanned(
                sig.fn_token,
                format!(
                    "`{fn_name}` is not async: make it an `async fn`, or serve it on the blocking \
                     pool with `#[tool(blocking)]`"
                ),
            ))
        }
        (true, true) => {
            return Err(Error::new_spanned(
                sig.asyncness,
                format!(
                    "`{fn_name}` is async and `blocking`: a blocking tool is a plain `fn` run on the \
                     blocking pool; remove `async` or `blocking`"
                ),
            ))
        }
        _ => {}
    }
    if let ReturnType::Default = sig.output {
        return Err(Error::new_spanned(
            &sig.ident,
            format!(
                "`{fn_name}` returns nothing: a tool answers with its return value; return a type \
                 that implements `IntoToolResult` (`String`, `Json<T>`, `ToolOutput`, or a \
                 `Result` of one)"
            ),
        ));
    }
    let description = match (&options.description, doc_text(attrs)) {
        (Some(d), _) => d.value(),
        (None, Some(d)) => d,
        (None, None) => {
            return Err(Error::new_spanned(
                &sig.ident,
                format!(
                    "`{fn_name}` has no description: the doc comment is the tool's description; \
                     add a `///` comment or `#[tool(description = \"...\")]`"
                ),
            ))
        }
    };
    let name = options.name.as_ref().map(LitStr::value).unwrap_or_else(|| fn_name.clone());

    let mut fields = Vec::new();
    let mut field_names = Vec::new();
    let mut checks = Vec::new();
    let mut call_args = Vec::new();
    let mut context: Option<Span> = None;
    for input in sig.inputs.iter_mut() {
        let FnArg::Typed(param) = input else { continue };
        if let Some(kind) = context_of(&param.ty) {
            if let Some(first) = context {
                let mut e = Error::new_spanned(
                    &param.ty,
                    "a tool takes at most one context parameter (`ToolCall` or `RequestContext`); \
                     reach the context through `call.ctx`",
                );
                e.combine(Error::new(first, "the first one"));
                return Err(e);
            }
            context = Some(param.ty.span());
            call_args.push(match kind {
                Context::Call => quote!(call),
                Context::CallRef => quote!(&call),
                Context::Ctx => quote!(call.ctx),
                Context::CtxRef => quote!(&call.ctx),
            });
            continue;
        }
        let ident = match &*param.pat {
            Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => p.ident.clone(),
            other => {
                return Err(Error::new_spanned(
                    other,
                    "a tool parameter is an argument property named after it: write `name: Type`, \
                     not a pattern",
                ))
            }
        };
        let ty = &param.ty;
        if let Type::Reference(_) | Type::ImplTrait(_) = &**ty {
            return Err(Error::new_spanned(
                ty,
                format!(
                    "`{ident}` is deserialized from the call's arguments into a value it owns: give \
                     it an owned type (`String`, not `&str`) that derives `Deserialize` and `JsonSchema`"
                ),
            ));
        }
        let (moved, kept): (Vec<Attribute>, Vec<Attribute>) = std::mem::take(&mut param.attrs)
            .into_iter()
            .partition(|a| ["doc", "serde", "schemars"].iter().any(|n| a.path().is_ident(n)));
        param.attrs = kept;
        // Spanned at the parameter's type, so that a type without a schema is reported there.
        checks.push(quote_spanned! {ty.span()=>
            #krate::__macros::assert_param::<#ty>();
        });
        fields.push(quote!(#(#moved)* #ident: #ty));
        field_names.push(ident.clone());
        call_args.push(quote!(#ident));
    }

    let m = quote!(#krate::__macros);
    let serde_path = format!("{}::__macros::serde", krate).replace(' ', "");
    let schemars_path = format!("{}::__macros::schemars", krate).replace(' ', "");
    let mut setters = Vec::new();
    if let Some(t) = &options.title {
        setters.push(quote!(.title(#t)));
    }
    if !options.hints.is_empty() {
        let (keys, values): (Vec<_>, Vec<_>) = options.hints.iter().cloned().unzip();
        setters.push(quote!(.annotations({
            let mut hints = #m::serde_json::Map::new();
            #( hints.insert(::std::string::String::from(#keys), #m::serde_json::Value::Bool(#values)); )*
            hints
        })));
    }
    if let Some(g) = &options.gate {
        setters.push(quote!(.gate(#g)));
    }
    if let Some(s) = &options.scopes {
        setters.push(quote!(.scopes(#s)));
    }
    if let Some(t) = &options.task_support {
        setters.push(quote!(.task_support(#m::TaskSupport::#t)));
    }
    if options.task_started_by_handler {
        setters.push(quote!(.task_started_by_handler()));
    }
    if let Some(uri) = &options.app {
        let v = options.visibility.clone().unwrap_or_else(|| format_ident!("ModelAndApp"));
        setters.push(quote!(.ui(#uri, #m::Visibility::#v)));
    }

    let ident = &sig.ident;
    let (call_expr, capture, clone_per_call) = match callee {
        Callee::Free => (quote!(#ident(#(#call_args),*)), quote!(), quote!()),
        Callee::Method { receiver: false } => (quote!(Self::#ident(#(#call_args),*)), quote!(), quote!()),
        Callee::Method { receiver: true } => (
            quote!(this.#ident(#(#call_args),*)),
            quote!(let this = ::std::sync::Arc::clone(&this);),
            quote!(let this = ::std::sync::Arc::clone(&this);),
        ),
    };
    let call_param = if context.is_some() { quote!(call) } else { quote!(_call) };
    let handler = if blocking {
        quote! {
            move |args: Args, #call_param: #m::ToolCall| {
                let Args { #(#field_names),* } = args;
                #call_expr
            }
        }
    } else {
        quote! {
            move |args: Args, #call_param: #m::ToolCall| {
                #clone_per_call
                async move {
                    let Args { #(#field_names),* } = args;
                    #call_expr.await
                }
            }
        }
    };
    let add = if blocking { quote!(blocking_typed_tool_with) } else { quote!(typed_tool_with) };
    Ok(quote! {
        #[derive(#m::serde::Deserialize, #m::schemars::JsonSchema)]
        #[serde(crate = #serde_path)]
        #[schemars(crate = #schemars_path)]
        struct Args {
            #(#fields),*
        }
        #(#checks)*
        let tool = #m::typed_tool::<Args>(#name, #description) #(#setters)*;
        #capture
        builder.#add(tool, #handler)
    })
}
