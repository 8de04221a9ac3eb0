//! The code `#[derive(AggregateRoot)]` generates.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, parse_quote};

use super::attrs::{self, AggregateAttrs};
use super::entity;
use super::fields::{self, AggregateFields};
use crate::runtime::runtime;

const SUPPORTED: &str = "a struct with named fields, one of them marked `#[aggregate(id)]` \
                         and one an `EventBuffer`";

pub(crate) fn derive(input: &DeriveInput) -> syn::Result<TokenStream> {
    let named = match &input.data {
        Data::Struct(data) => match &data.fields {
            Fields::Named(named) => named,
            Fields::Unnamed(_) => {
                return Err(syn::Error::new_spanned(
                    &data.fields,
                    format!(
                        "AggregateRoot cannot be derived for tuple structs; it is derived for \
                         {SUPPORTED}"
                    ),
                ));
            }
            Fields::Unit => {
                return Err(syn::Error::new_spanned(
                    &input.ident,
                    format!(
                        "AggregateRoot cannot be derived for unit structs; it is derived for \
                         {SUPPORTED}"
                    ),
                ));
            }
        },
        Data::Enum(data) => {
            return Err(syn::Error::new_spanned(
                data.enum_token,
                format!("AggregateRoot cannot be derived for enums; it is derived for {SUPPORTED}"),
            ));
        }
        Data::Union(data) => {
            return Err(syn::Error::new_spanned(
                data.union_token,
                format!(
                    "AggregateRoot cannot be derived for unions; it is derived for {SUPPORTED}"
                ),
            ));
        }
    };
    let attrs = attrs::parse(input)?;
    let fields = fields::find(input, named)?;
    Ok(generate(input, &attrs, &fields))
}

fn generate(
    input: &DeriveInput,
    attrs: &AggregateAttrs,
    fields: &AggregateFields<'_>,
) -> TokenStream {
    let ident = &input.ident;
    let runtime = runtime(attrs.krate.clone());
    let krate = &runtime.core;
    let aggregate_type = &attrs.aggregate_type;
    let id = &fields.id.ident;
    let id_ty = &fields.id.ty;
    let events = &fields.events.ident;
    let events_ty = fields.events.ty.span();

    // A generic id type needs `Display`; a concrete one is checked where it
    // is used, with the error on the field's type.
    let mut generics = input.generics.clone();
    if input.generics.type_params().next().is_some() {
        generics
            .make_where_clause()
            .predicates
            .push(parse_quote!(#id_ty: #krate::__private::Display));
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();

    let aggregate_id = quote_spanned! {id_ty.span()=>
        #krate::__private::display_id(&self.#id)
    };
    let events_ref = quote_spanned! {events_ty=> &self.#events };
    let events_mut = quote_spanned! {events_ty=> &mut self.#events };
    let impl_header = quote_spanned! {ident.span()=>
        impl #impl_generics #krate::__private::AggregateRoot for #ident #ty_generics #where_clause
    };

    let entity_impl = attrs
        .entity
        .as_ref()
        .map(|entity| entity::generate(input, &generics, &runtime, entity, fields.events));

    quote! {
        #entity_impl

        #[automatically_derived]
        #impl_header {
            const AGGREGATE_TYPE: &'static str = #aggregate_type;

            fn aggregate_id(&self) -> #krate::__private::String {
                #aggregate_id
            }

            fn events(&self) -> &#krate::__private::EventBuffer {
                #events_ref
            }

            fn events_mut(&mut self) -> &mut #krate::__private::EventBuffer {
                #events_mut
            }
        }
    }
}
