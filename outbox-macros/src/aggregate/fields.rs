//! Finding the id field and the `EventBuffer` field.

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{DeriveInput, Field, FieldsNamed, Type};

use crate::attrs::key_of;

const KEYS: &str = "`id`, `events`";

/// The two fields the generated impl reads.
pub(crate) struct AggregateFields<'a> {
    /// The field marked `#[aggregate(id)]`, or else the one field marked
    /// `#[sea_orm(primary_key)]` (a SeaORM model).
    pub(crate) id: &'a Field,
    /// The field marked `#[aggregate(events)]`, or else the one field whose
    /// type is an `EventBuffer`.
    pub(crate) events: &'a Field,
}

/// Where a field's `#[aggregate(...)]` marks it, by the key's span.
#[derive(Default)]
struct Marks {
    id: Option<Span>,
    events: Option<Span>,
}

pub(crate) fn find<'a>(
    input: &DeriveInput,
    fields: &'a FieldsNamed,
) -> syn::Result<AggregateFields<'a>> {
    let mut id: Option<&Field> = None;
    let mut primary_keys: Vec<&Field> = Vec::new();
    let mut marked_events: Option<&Field> = None;
    let mut typed_events: Vec<&Field> = Vec::new();
    for field in &fields.named {
        let marks = parse_marks(field)?;
        if is_sea_orm_primary_key(field) {
            primary_keys.push(field);
        }
        if marks.id.is_some() && marks.events.is_some() {
            return Err(syn::Error::new_spanned(
                field,
                "a field cannot be both the aggregate's `id` and its `events`",
            ));
        }
        if let Some(span) = marks.id {
            if let Some(first) = id {
                return Err(syn::Error::new(
                    span,
                    format!(
                        "two `#[aggregate(id)]` fields: an aggregate has one id, already \
                         marked on `{}`; for a composite id, mark one field whose `Display` \
                         joins the parts",
                        name(first)
                    ),
                ));
            }
            id = Some(field);
        }
        if let Some(span) = marks.events {
            if let Some(first) = marked_events {
                return Err(syn::Error::new(
                    span,
                    format!(
                        "two `#[aggregate(events)]` fields: already marked on `{}`",
                        name(first)
                    ),
                ));
            }
            marked_events = Some(field);
        } else if is_event_buffer(&field.ty) {
            typed_events.push(field);
        }
    }
    let id = match (id, primary_keys.as_slice()) {
        (Some(marked), _) => marked,
        (None, [one]) => one,
        (None, []) => {
            return Err(syn::Error::new_spanned(
                &input.ident,
                "missing `#[aggregate(id)]`: mark the field holding the aggregate's id \
                 (any type that implements `Display`)",
            ));
        }
        (None, [first, second, ..]) => {
            return Err(syn::Error::new_spanned(
                *second,
                format!(
                    "a composite primary key (`{}`, `{}`, ...): mark the field whose \
                     `Display` is the aggregate's id with `#[aggregate(id)]`",
                    name(first),
                    name(second)
                ),
            ));
        }
    };
    let events = match (marked_events, typed_events.as_slice()) {
        (Some(marked), _) => marked,
        (None, [one]) => one,
        (None, []) => {
            return Err(syn::Error::new_spanned(
                &input.ident,
                "missing `EventBuffer` field: add one, e.g. `events: txoutbox::EventBuffer`, \
                 or mark it with `#[aggregate(events)]`",
            ));
        }
        (None, [first, second, ..]) => {
            return Err(syn::Error::new_spanned(
                *second,
                format!(
                    "two `EventBuffer` fields, `{}` and `{}`: mark the one this aggregate \
                     records its events in with `#[aggregate(events)]`",
                    name(first),
                    name(second)
                ),
            ));
        }
    };
    Ok(AggregateFields { id, events })
}

/// Whether `field` carries `#[sea_orm(primary_key ...)]`: a SeaORM model's
/// key, the aggregate's id when no field is marked `#[aggregate(id)]`.
fn is_sea_orm_primary_key(field: &Field) -> bool {
    field
        .attrs
        .iter()
        .filter(|attr| attr.path().is_ident("sea_orm"))
        .any(|attr| {
            let mut found = false;
            // Other keys (`auto_increment = false`, `column_name = ".."`)
            // are skipped, values and all.
            let _ = attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("primary_key") {
                    found = true;
                }
                if meta.input.peek(syn::Token![=]) {
                    let _: syn::Expr = meta.value()?.parse()?;
                } else if meta.input.peek(syn::token::Paren) {
                    let _ = meta.parse_nested_meta(|_| Ok(()));
                }
                Ok(())
            });
            found
        })
}

fn parse_marks(field: &Field) -> syn::Result<Marks> {
    let mut marks = Marks::default();
    for attr in field
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("aggregate"))
    {
        attr.parse_nested_meta(|meta| parse_key(&meta, &mut marks))?;
    }
    Ok(marks)
}

fn parse_key(meta: &ParseNestedMeta<'_>, marks: &mut Marks) -> syn::Result<()> {
    let key = key_of(meta);
    let slot = match key.as_str() {
        "id" => &mut marks.id,
        "events" => &mut marks.events,
        "type" | "crate" | "entity" | "version_column" => {
            return Err(meta.error(format!(
                "`{key}` belongs on the struct: `#[aggregate({key} = \"...\")]`"
            )));
        }
        _ => {
            return Err(meta.error(format!(
                "unknown `aggregate` attribute key on a field; expected {KEYS} \
                 (the struct takes `type`, `crate`, `entity` and `version_column`)"
            )));
        }
    };
    if slot.is_some() {
        return Err(meta.error(format!("duplicate `{key}` key")));
    }
    *slot = Some(meta.path.span());
    Ok(())
}

/// `EventBuffer`, `txoutbox::EventBuffer`, ...: the last path segment.
fn is_event_buffer(ty: &Type) -> bool {
    match ty {
        Type::Path(path) if path.qself.is_none() => {
            path.path.segments.last().is_some_and(|segment| {
                segment.ident == "EventBuffer" && segment.arguments.is_none()
            })
        }
        Type::Group(group) => is_event_buffer(&group.elem),
        Type::Paren(paren) => is_event_buffer(&paren.elem),
        _ => false,
    }
}

fn name(field: &Field) -> String {
    field
        .ident
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id_of(input: DeriveInput) -> syn::Result<String> {
        let syn::Data::Struct(syn::DataStruct {
            fields: syn::Fields::Named(fields),
            ..
        }) = &input.data
        else {
            unreachable!("the cases are structs with named fields")
        };
        find(&input, fields).map(|found| name(found.id))
    }

    #[test]
    fn a_sea_orm_primary_key_is_the_id_when_none_is_marked() {
        let model: DeriveInput = syn::parse_quote! {
            struct Model {
                #[sea_orm(column_type = "Text", primary_key, auto_increment = false)]
                key: String,
                total: i64,
                events: EventBuffer,
            }
        };
        assert_eq!(id_of(model).expect("an id"), "key");
    }

    #[test]
    fn a_marked_id_wins_over_the_primary_key() {
        let model: DeriveInput = syn::parse_quote! {
            struct Model {
                #[sea_orm(primary_key)]
                row: i64,
                #[aggregate(id)]
                number: String,
                events: EventBuffer,
            }
        };
        assert_eq!(id_of(model).expect("an id"), "number");
    }

    #[test]
    fn a_composite_primary_key_asks_for_a_mark() {
        let model: DeriveInput = syn::parse_quote! {
            struct Model {
                #[sea_orm(primary_key)]
                tenant: String,
                #[sea_orm(primary_key)]
                number: String,
                events: EventBuffer,
            }
        };
        let err = id_of(model).expect_err("ambiguous");
        assert!(err.to_string().contains("composite primary key"), "{err}");
    }

    #[test]
    fn no_id_and_no_primary_key_is_refused() {
        let model: DeriveInput = syn::parse_quote! {
            struct Model {
                #[sea_orm(column_name = "n")]
                number: String,
                events: EventBuffer,
            }
        };
        let err = id_of(model).expect_err("no id");
        assert!(
            err.to_string().contains("missing `#[aggregate(id)]`"),
            "{err}"
        );
    }
}
