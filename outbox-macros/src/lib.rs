//! `#[derive(IntegrationEvent)]` and `#[derive(AggregateRoot)]` for
//! [`txoutbox-core`](https://docs.rs/txoutbox-core) (the `txoutbox_core` library).
//!
//! Use them through `txoutbox_core::IntegrationEvent` and
//! `txoutbox_core::AggregateRoot` (the `derive` feature, on by default); their
//! attributes are documented there. The generated code names
//! only `txoutbox_core` (through its hidden `__private` module), so user crates
//! need no dependency on `inventory`.

mod aggregate;
mod attrs;
mod expand;

use proc_macro::TokenStream;
use syn::{DeriveInput, parse_macro_input};

/// Implements `txoutbox_core::IntegrationEvent` and registers the type with the
/// event registry. See `txoutbox_core::IntegrationEvent` for the attributes.
#[proc_macro_derive(IntegrationEvent, attributes(event))]
pub fn derive_integration_event(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::derive(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Implements `txoutbox_core::AggregateRoot` for a struct with named fields: its
/// `#[aggregate(type = "...")]`, the field marked `#[aggregate(id)]` and its
/// `EventBuffer` field. See `txoutbox_core::AggregateRoot` for the attributes.
#[proc_macro_derive(AggregateRoot, attributes(aggregate))]
pub fn derive_aggregate_root(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    aggregate::derive(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
