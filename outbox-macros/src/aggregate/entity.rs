//! The `AggregateEntity` impl `#[aggregate(entity = ..., version_column = ...)]`
//! asks for: a SeaORM model that is its own aggregate.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::{DeriveInput, Field, Generics};

use super::attrs::EntityAttrs;
use crate::runtime::Runtime;

/// `impl AggregateEntity for Model` (txoutbox-sea-orm's): the entity and version
/// column as given, `from_model` puts the loaded buffer into the loaded
/// model, `to_active_model` is `self.clone().into_active_model()`.
pub(crate) fn generate(
    input: &DeriveInput,
    generics: &Generics,
    runtime: &Runtime,
    attrs: &EntityAttrs,
    events: &Field,
) -> TokenStream {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let entity = &attrs.entity;
    let version_column = &attrs.version_column;
    let events = &events.ident;
    let span = attrs.entity_lit.span();
    let entity_runtime = &runtime.entity;
    let private = quote_spanned!(span=> #entity_runtime::__private);
    let krate = &runtime.core;
    let entity_trait = quote_spanned!(span=> <#entity as #private::EntityTrait>);
    let from_model = quote_spanned! {span=>
        let mut aggregate: Self = model;
        aggregate.#events = events;
        aggregate
    };
    let to_active_model = quote_spanned! {span=>
        #private::IntoActiveModel::into_active_model(::core::clone::Clone::clone(self))
    };
    let impl_header = quote_spanned! {ident.span()=>
        impl #impl_generics #private::AggregateEntity for #ident #ty_generics #where_clause
    };

    quote! {
        #[automatically_derived]
        #impl_header {
            type Entity = #entity;

            fn version_column() -> #entity_trait::Column {
                #version_column
            }

            fn from_model(model: #entity_trait::Model, events: #krate::__private::EventBuffer) -> Self {
                #from_model
            }

            fn to_active_model(&self) -> #entity_trait::ActiveModel {
                #to_active_model
            }
        }
    }
}
