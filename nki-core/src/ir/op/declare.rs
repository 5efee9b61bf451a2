//! The `instructions!` macro: declares [`super::Op`] from the family declarations and derives
//! everything that follows from them.

/// Declares [`Op`](super::Op) and derives from its declaration everything that follows the
/// operands: the instruction names, the operand visitor, the accessors built on it, and the
/// instruction's NKI keywords as codegen spells them.
///
/// The declaration is split by instruction family (`dma.rs`, `elementwise.rs`, ...): each family
/// is a macro that appends its variants and calls the next one, the last being this one with an
/// empty list. A variant is `Name = "nki_name" { role field: Type => keywords, ... }`:
///
/// - the role is `read`, `write` or `param`;
/// - the keywords are the NKI keyword the field becomes (`a: TileRegion => data1`), a tuple of
///   them for a field that becomes several (`op1: Option<(BinOp, ScalarOperand)> => (op1,
///   operand1)`), or `_` for a field the instruction's codegen hook spells
///   (`crate::codegen`'s `hooks`); `via adaptor` names a function of `crate::codegen::via` that
///   spells the field instead of its type's `Spell` / `SpellMany` implementation (a reduction
///   that also sets `reduce_cmd`).
///
/// After the fields: `reads field when flag` for a destination an instruction also reads when a
/// boolean parameter says so (`nc_matmul`'s accumulation), `keeps field & ...` for destinations
/// it writes only in part, the rest keeping its value (`tensor_copy_predicated`), so it also
/// reads them, and `explicit keyword & ...` for keywords codegen writes even when their value is
/// the signature's default (a default that differs between NKI releases).
macro_rules! instructions {
    (
        []
        $(#[$enum_doc:meta])*
        pub enum Op;
        $(
            $(#[$doc:meta])*
            $variant:ident = $name:literal {
                $(
                    $(#[$field_doc:meta])*
                    $role:ident $field:ident : $ty:ty => $kws:tt $(via $via:ident)?
                ),* $(,)?
            } $(reads $also:ident when $flag:ident)? $(keeps $($kept:ident)&+)?
              $(explicit $($explicit:ident)&+)?
        ),* $(,)?
    ) => {
        $(#[$enum_doc])*
        #[derive(Clone, Debug, PartialEq, Serialize)]
        #[serde(tag = "inst", rename_all = "snake_case")]
        pub enum Op {
            $(
                $(#[$doc])*
                $variant { $( $(#[$field_doc])* $field: $ty ),* },
            )*
        }

        impl Op {
            /// Every instruction's `nki.isa` name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// Every instruction's declared NKI keywords: its name, the keywords of each field
            /// (none for a field its codegen hook spells), and the keywords written even at
            /// their default.
            pub const KEYWORDS: &'static [(
                &'static str,
                &'static [&'static [&'static str]],
                &'static [&'static str],
            )] = &[$((
                $name,
                &[$( instructions!(@names $kws) ),*],
                &[$($(stringify!($explicit)),+)?],
            )),*];

            /// Every instruction's destinations that it also reads, by `nki.isa` name: those
            /// declared `reads ... when` (read when a flag is set) and `keeps` (written in
            /// part). A tool that must not lose a destination's old value (the frontend's
            /// dtype views) keeps these in step before the instruction runs.
            pub const READS_DESTINATION: &'static [(&'static str, &'static [&'static str])] = &[$((
                $name,
                &[$(stringify!($also),)? $($(stringify!($kept),)+)?],
            )),*];

            /// The `nki.isa` instruction name.
            pub const fn name(&self) -> &'static str {
                match self {
                    $( Op::$variant { .. } => $name, )*
                }
            }

            /// Calls `f` with every tile region and HBM access the instruction names, in field
            /// order, with how it uses each.
            pub fn visit_operands<'a>(&'a self, f: &mut dyn FnMut(OperandUse<'a>)) {
                match self {
                    $(
                        #[allow(unused_variables)]
                        Op::$variant { $($field),* } => {
                            $( instructions!(@visit $role $field f); )*
                            $( if *$flag { Operand::visit($also, Access::Read, f); } )?
                            $($( Operand::visit($kept, Access::Read, f); )+)?
                        }
                    )*
                }
            }

            /// Calls `f` with every ALU operator the instruction uses (`op=`, `op0=`,
            /// `reduce_op=`, ...), in field order.
            pub fn visit_operators(&self, f: &mut dyn FnMut(BinOp)) {
                match self {
                    $(
                        #[allow(unused_variables)]
                        Op::$variant { $($field),* } => {
                            $( instructions!(@ops $role $field f); )*
                        }
                    )*
                }
            }

            /// The same instruction with every tile region passed through `tile` and every HBM
            /// offset through `offset` (renumbering tiles, substituting loop indices).
            pub fn map_operands(
                &self,
                tile: &mut dyn FnMut(&TileRegion) -> TileRegion,
                offset: &mut dyn FnMut(&AffineExpr) -> AffineExpr,
            ) -> Op {
                let mut m = OperandMap { tile, offset };
                match self {
                    $(
                        Op::$variant { $($field),* } => Op::$variant {
                            $( $field: instructions!(@map $role $field m) ),*
                        },
                    )*
                }
            }

            /// Spells every field into `kw` as its declared keyword(s), and marks the keywords
            /// declared `explicit`.
            pub(crate) fn spell_fields(
                &self,
                e: &$crate::codegen::Emitter<'_>,
                kw: &mut $crate::codegen::Kwargs,
            ) {
                match self {
                    $(
                        #[allow(unused_variables)]
                        Op::$variant { $($field),* } => {
                            $( instructions!(@spell e kw $field $kws $(via $via)?); )*
                            kw.explicit(&[$($(stringify!($explicit)),+)?]);
                        }
                    )*
                }
            }
        }
    };
    (@visit read $field:ident $f:ident) => { Operand::visit($field, Access::Read, $f) };
    (@visit write $field:ident $f:ident) => { Operand::visit($field, Access::Write, $f) };
    (@visit param $field:ident $f:ident) => { () };
    (@ops read $field:ident $f:ident) => { Operand::operators($field, $f) };
    (@ops write $field:ident $f:ident) => { Operand::operators($field, $f) };
    (@ops param $field:ident $f:ident) => { Param::operators($field, $f) };
    (@map read $field:ident $m:ident) => { Operand::map($field, &mut $m) };
    (@map write $field:ident $m:ident) => { Operand::map($field, &mut $m) };
    (@map param $field:ident $m:ident) => { $field.clone() };
    (@names _) => { &[] };
    (@names $k:ident) => { &[stringify!($k)] };
    (@names ($($k:ident),+)) => { &[$(stringify!($k)),+] };
    (@spell $e:ident $kw:ident $field:ident _) => { () };
    (@spell $e:ident $kw:ident $field:ident $k:tt via $via:ident) => {
        $kw.set_many(instructions!(@names $k), |ps| $crate::codegen::via::$via($field, $e, ps))
    };
    (@spell $e:ident $kw:ident $field:ident $k:ident) => {
        $kw.set_one(stringify!($k), |p| $crate::codegen::Spell::spell($field, $e, p))
    };
    (@spell $e:ident $kw:ident $field:ident ($($k:ident),+)) => {
        $kw.set_many(&[$(stringify!($k)),+], |ps| {
            $crate::codegen::SpellMany::spell_many($field, $e, ps)
        })
    };
}
