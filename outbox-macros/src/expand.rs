//! The code `#[derive(IntegrationEvent)]` generates.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput};

use crate::attrs::{self, EventAttrs};
use crate::runtime::runtime;

pub(crate) fn derive(input: &DeriveInput) -> syn::Result<TokenStream> {
    if let Data::Union(data) = &input.data {
        return Err(syn::Error::new(
            data.union_token.span(),
            "IntegrationEvent cannot be derived for unions; use a struct or an enum",
        ));
    }
    let generics = &input.generics;
    if !generics.params.is_empty() {
        let only_lifetimes =
            generics.type_params().next().is_none() && generics.const_params().next().is_none();
        let message = if only_lifetimes {
            "IntegrationEvent cannot be derived for types with lifetime parameters: events are \
             decoded into owned values (`DeserializeOwned + 'static`); use owned fields, e.g. \
             `String` rather than `&str`"
        } else {
            "IntegrationEvent cannot be derived for generic types: the registry needs one \
             concrete Rust type per (name, version); declare a concrete type per event"
        };
        return Err(syn::Error::new_spanned(generics, message));
    }
    let attrs = attrs::parse(input)?;
    Ok(generate(input, &attrs))
}

fn generate(input: &DeriveInput, attrs: &EventAttrs) -> TokenStream {
    let ident = &input.ident;
    let krate = runtime(attrs.krate.clone()).core;
    let name = &attrs.name;
    let version = attrs.version;
    let version_lit = quote_spanned!(attrs.version_span=> #version);
    let subject = match &attrs.subject {
        Some(subject) => quote!(#krate::__private::EventSubject::Fixed(#subject)),
        None => quote!(#krate::__private::EventSubject::Derived),
    };
    let (registration, upcast_checks) = match &attrs.upcast_from {
        None => (
            quote!(#krate::__private::EventRegistration::of::<Self>()),
            TokenStream::new(),
        ),
        Some(previous) => {
            let span = previous.span();
            let registration = quote_spanned! {span=>
                #krate::__private::EventRegistration::of_upcasting::<Self, #previous>()
            };
            let checks = quote_spanned! {span=>
                const _: () = {
                    ::core::assert!(
                        #krate::__private::same_name(
                            <#previous as #krate::__private::IntegrationEvent>::NAME,
                            #name,
                        ),
                        "`upcast_from` must name a previous version of the same event (same `name`)",
                    );
                    ::core::assert!(
                        <#previous as #krate::__private::IntegrationEvent>::VERSION == #version - 1,
                        "`upcast_from` must name the version just before this one",
                    );
                };
            };
            (registration, checks)
        }
    };
    // The payload's JSON Schema when the type implements
    // `schemars::JsonSchema` (and outbox-core's feature `schema` is on),
    // found without requiring it: see outbox-core's `schema_probe`.
    let registration = quote! {
        #registration.with_schema({
            fn schema() -> ::core::option::Option<#krate::__private::JsonValue> {
                #[allow(unused_imports)]
                use #krate::__private::{HasSchema as _, NoSchema as _};
                (&#krate::__private::SchemaProbe::<#ident>::new()).schema()
            }
            schema
        })
    };
    let impl_header = quote_spanned! {ident.span()=>
        impl #krate::__private::IntegrationEvent for #ident
    };

    quote! {
        #[automatically_derived]
        #impl_header {
            const NAME: &'static str = #name;
            const VERSION: u32 = #version_lit;
            const SUBJECT: #krate::__private::EventSubject = #subject;
            const REGISTRATION: #krate::__private::EventRegistration = #registration;
        }

        #upcast_checks

        #krate::__private::inventory::submit! {
            <#ident as #krate::__private::IntegrationEvent>::REGISTRATION
        }
    }
}
