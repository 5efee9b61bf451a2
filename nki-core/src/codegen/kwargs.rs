//! The keyword arguments of one `nisa.*` call, held against the instruction's signature in
//! `nki_spec`: the signature gives their order, and a keyword is written only when its value
//! differs from the signature's default, when it is required, or when the declaration marks it
//! `explicit`.

use super::float;
use nki_spec::{Default, InstrSpec, Kind, Param};

/// The keyword values spelled for one call, before ordering and default elision.
pub(crate) struct Kwargs {
    spec: &'static InstrSpec,
    values: Vec<(&'static str, Option<String>)>,
    explicit: Vec<&'static str>,
}

impl Kwargs {
    /// Empty keywords for `nisa.<name>`.
    ///
    /// # Panics
    ///
    /// When `nki_spec` does not declare `name` (a bug: every IR instruction is declared there,
    /// which `nki-core/tests/spec.rs` checks).
    pub(crate) fn new(name: &str) -> Kwargs {
        let spec = nki_spec::instruction(name)
            .unwrap_or_else(|| panic!("nisa.{name} is not declared in nki_spec"));
        Kwargs {
            spec,
            values: Vec::new(),
            explicit: Vec::new(),
        }
    }

    /// The signature's parameter `name`.
    ///
    /// # Panics
    ///
    /// When the signature has no such keyword (a bug in a declaration or a hook, which the
    /// keyword tests catch).
    pub(crate) fn param(&self, name: &str) -> &'static Param {
        self.spec
            .param(name)
            .unwrap_or_else(|| panic!("nisa.{} takes no keyword `{name}`", self.spec.name))
    }

    /// Sets keyword `name` to `value` (`None`: not written), replacing an earlier value.
    pub(crate) fn set(&mut self, name: &'static str, value: Option<String>) {
        let name = self.param(name).name;
        match self.values.iter_mut().find(|(k, _)| *k == name) {
            Some(slot) => slot.1 = value,
            None => self.values.push((name, value)),
        }
    }

    /// Sets keyword `name` to what `spell` makes of its parameter.
    pub(crate) fn set_one(
        &mut self,
        name: &'static str,
        spell: impl FnOnce(&Param) -> Option<String>,
    ) {
        let value = spell(self.param(name));
        self.set(name, value);
    }

    /// Sets keywords `names` to what `spell` makes of their parameters, one value each.
    pub(crate) fn set_many(
        &mut self,
        names: &[&'static str],
        spell: impl FnOnce(&[&Param]) -> Vec<Option<String>>,
    ) {
        let params: Vec<&Param> = names.iter().map(|n| self.param(n)).collect();
        let values = spell(&params);
        debug_assert_eq!(values.len(), names.len(), "one value per keyword");
        for (name, value) in names.iter().zip(values) {
            self.set(name, value);
        }
    }

    /// Marks `names` as written even at their default.
    pub(crate) fn explicit(&mut self, names: &[&'static str]) {
        for name in names {
            self.explicit.push(self.param(name).name);
        }
    }

    /// Keyword `name`'s value if it will be written, before ordering: set, and not elided as
    /// the signature's default.
    pub(crate) fn written(&self, name: &str) -> Option<&str> {
        let p = self.spec.param(name)?;
        let (_, value) = self.values.iter().find(|(k, _)| *k == name)?;
        let value = value.as_deref()?;
        self.keeps(p, value).then_some(value)
    }

    fn keeps(&self, p: &Param, value: &str) -> bool {
        self.explicit.contains(&p.name)
            || p.default == Default::Required
            || default_spelling(&p.default).as_deref() != Some(value)
    }

    /// `nisa.<name>(kw=value, ...)`: the keywords in the signature's order, each written when
    /// set and not the signature's default (unless explicit), and every required keyword
    /// written: one left unset is spelled as its kind's neutral value (`nl.bypass` for an
    /// operator, `0.0` for a scalar).
    ///
    /// # Panics
    ///
    /// When a required keyword is unset and its kind has no neutral value (a bug in a
    /// declaration or a hook).
    pub(crate) fn call(&self) -> String {
        let mut args = Vec::new();
        for p in self.spec.params {
            let value = self
                .values
                .iter()
                .find(|(k, _)| *k == p.name)
                .and_then(|(_, v)| v.clone());
            match value {
                Some(v) if self.keeps(p, &v) => args.push(format!("{}={v}", p.name)),
                Some(_) => {}
                None if p.default == Default::Required => {
                    let v = neutral(p.kind).unwrap_or_else(|| {
                        panic!(
                            "nisa.{}: required keyword `{}` unset",
                            self.spec.name, p.name
                        )
                    });
                    args.push(format!("{}={v}", p.name));
                }
                None => {}
            }
        }
        format!("nisa.{}({})", self.spec.name, args.join(", "))
    }
}

/// A default as codegen would spell the same value; `None` where no spelled value equals it
/// (`None`, `...`, required).
fn default_spelling(d: &Default) -> Option<String> {
    match *d {
        Default::Required | Default::None | Default::Ellipsis => None,
        Default::Bool(b) => Some(if b { "True" } else { "False" }.into()),
        Default::Int(i) => Some(i.to_string()),
        Default::Float(f) => Some(float(f as f32)),
        Default::Enum(of, variant) => Some(format!("nisa.{of}.{variant}")),
        Default::Operator(op) => Some(format!("nl.{op}")),
        Default::EmptyTuple => Some("()".into()),
        Default::DType(t) => Some(format!("nl.{t}")),
        Default::Buffer(b) => Some(format!("nl.{b}")),
        Default::Str(s) => Some(format!("'{s}'")),
    }
}

/// What a required keyword the IR leaves empty is spelled as: `nl.bypass` for an operator
/// (`activate2`'s stage without one), `0.0` for its operand.
fn neutral(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::Operator => Some("nl.bypass"),
        Kind::Scalar | Kind::Number => Some("0.0"),
        _ => None,
    }
}
