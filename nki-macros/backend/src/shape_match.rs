//! Checks of an output shape written as a `match` on a string parameter
//! (`loss = match reduction { "none" => [N], _ => [] }`) against the function's parameters.

use crate::Errors;
use crate::attr::OutMatch;
use crate::signature::KernelFn;

/// A `match` output shape: it matches on a `&str` parameter with `#[choices(..)]`, each value
/// is one of those choices and appears once, `_` comes last, and without `_` the arms name
/// every choice.
pub fn check_out_match(f: &KernelFn, m: &OutMatch, errors: &mut Errors) {
    let param = &m.param;
    let Some(p) = f.param(param).filter(|p| !p.choices.is_empty()) else {
        errors.push(syn::Error::new(
            param.span(),
            format!(
                "an output shape can only `match` on a `&str` parameter with `#[choices(..)]`, \
                 and `{param}` is not one"
            ),
        ));
        return;
    };
    let mut seen: Vec<String> = Vec::new();
    for (i, arm) in m.arms.iter().enumerate() {
        if let Some(w) = &arm.wildcard
            && i + 1 != m.arms.len()
        {
            errors.push(syn::Error::new(
                w.span,
                "`_` matches every value, so the arms after it are unreachable; make it the last arm",
            ));
        }
        for v in &arm.values {
            let value = v.value();
            if !p.choices.contains(&value) {
                errors.push(syn::Error::new(
                    v.span(),
                    format!(
                        "`{param}` never is {value:?}: its choices are {}",
                        quoted(&p.choices)
                    ),
                ));
            } else if seen.contains(&value) {
                errors.push(syn::Error::new(
                    v.span(),
                    format!("{value:?} is matched by an earlier arm; this arm never sees it"),
                ));
            } else {
                seen.push(value);
            }
        }
    }
    let has_wildcard = m.arms.iter().any(|a| a.wildcard.is_some());
    let missing: Vec<String> = p
        .choices
        .iter()
        .filter(|c| !seen.contains(c))
        .cloned()
        .collect();
    if !has_wildcard && !missing.is_empty() {
        errors.push(syn::Error::new(
            m.keyword.span,
            format!(
                "this `match` on `{param}` has no arm for {}; add them or end with `_ => [...]`",
                quoted(&missing)
            ),
        ));
    }
}

fn quoted(values: &[String]) -> String {
    let q: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    q.join(", ")
}
