//! `#[derive(IntegrationEvent)]` and `#[derive(AggregateRoot)]` for
//! [`txoutbox`](https://docs.rs/txoutbox), the transactional outbox.
//!
//! Use them through `txoutbox::IntegrationEvent` and
//! `txoutbox::AggregateRoot` (the `derive` feature, on by default); their
//! attributes are documented there. The generated code names only
//! `::txoutbox` (through its hidden `__private` module), so user crates need
//! no dependency on `inventory` or the crates behind the facade; a crate
//! that re-exports `txoutbox` says where with `crate = "path::to::txoutbox"`.
//! Inside the facade's own crates (`txoutbox-core`, `txoutbox-sea-orm`,
//! `txoutbox-nats`, `txoutbox-testing`), which cannot depend on it, the
//! generated code names `txoutbox_core` and `txoutbox_sea_orm`.

mod aggregate;
mod attrs;
mod expand;
mod runtime;

use proc_macro::TokenStream;
use syn::{DeriveInput, parse_macro_input};

/// Implements `txoutbox::IntegrationEvent` and registers the type with the
/// event registry. See `txoutbox::IntegrationEvent` for the attributes.
#[proc_macro_derive(IntegrationEvent, attributes(event))]
pub fn derive_integration_event(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::derive(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Implements `txoutbox::AggregateRoot` for a struct with named fields: its
/// `#[aggregate(type = "...")]`, the field marked `#[aggregate(id)]` (or a
/// SeaORM model's one `#[sea_orm(primary_key)]` field) and its
/// `EventBuffer` field. See `txoutbox::AggregateRoot` for the attributes.
#[proc_macro_derive(AggregateRoot, attributes(aggregate))]
pub fn derive_aggregate_root(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    aggregate::derive(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
