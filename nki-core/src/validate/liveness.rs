//! The liveness rules: a tile is used only inside the block that allocated it (`tile-scope`),
//! and the tiles live at once fit SBUF (`sbuf-capacity`) and the PSUM banks (`psum-banks-live`).

use super::{describe_tile, violation};
use crate::error::NkiError;
use crate::ir::{Buffer, Program, Stmt, TileId};
use crate::loc::SourceLoc;
use crate::target::{PSUM_BANK_BYTES, PSUM_BANKS};

/// A tile's live interval in program positions, and the block that owns it.
struct Live {
    alloc: usize,
    last: usize,
    blocks: Vec<usize>,
}

struct Walker {
    pos: usize,
    next_block: usize,
    blocks: Vec<usize>,
    /// Each tile's live interval, once allocated.
    live: Vec<Option<Live>>,
    /// `(tile, position, blocks at use)` for uses to resolve after the walk.
    uses: Vec<(TileId, usize, Vec<usize>, SourceLoc, &'static str)>,
    block_end: Vec<usize>,
}

impl Walker {
    fn walk(&mut self, body: &[Stmt]) {
        for s in body {
            self.pos += 1;
            match s {
                Stmt::Alloc { tile } => {
                    self.live[tile.0 as usize] = Some(Live {
                        alloc: self.pos,
                        last: self.pos,
                        blocks: self.blocks.clone(),
                    });
                }
                Stmt::Inst(inst) => {
                    let mut regions = inst.op.tile_reads();
                    regions.extend(inst.op.tile_writes());
                    for r in regions {
                        self.uses.push((
                            r.tile,
                            self.pos,
                            self.blocks.clone(),
                            inst.loc,
                            inst.op.name(),
                        ));
                    }
                }
                Stmt::Loop { body, .. } | Stmt::DeviceLoop { body, .. } => {
                    let id = self.next_block;
                    self.next_block += 1;
                    self.block_end.push(0);
                    self.blocks.push(id);
                    self.walk(body);
                    self.blocks.pop();
                    self.pos += 1;
                    self.block_end[id] = self.pos;
                }
            }
        }
    }
}

/// Walks the program once, recording each tile's live interval and the blocks it is used in,
/// then checks scope and capacity.
pub(super) fn check_liveness(program: &Program) -> Result<(), NkiError> {
    let mut w = Walker {
        pos: 0,
        next_block: 1,
        blocks: vec![0],
        live: (0..program.tiles.len()).map(|_| None).collect(),
        uses: Vec::new(),
        block_end: vec![usize::MAX],
    };
    w.walk(&program.body);
    let Walker {
        mut live,
        uses,
        block_end,
        ..
    } = w;
    for (tile, pos, blocks, loc, inst) in uses {
        let t = &program.tiles[tile.0 as usize];
        let Some(l) = live[tile.0 as usize].as_mut() else {
            return Err(violation(
                "tile-scope",
                "after alloc",
                "before alloc",
                inst.into(),
                format!("{} is used before it is allocated", t.name),
                loc,
            ));
        };
        let owner = *l
            .blocks
            .last()
            .expect("every tile is allocated in some block");
        let Some(depth) = blocks.iter().position(|b| *b == owner) else {
            return Err(violation(
                "tile-scope",
                "inside the allocating block",
                "outside it",
                inst.into(),
                format!(
                    "{} is used outside the loop body that allocated it (allocated at {})",
                    t.name, t.loc
                ),
                loc,
            ));
        };
        // A use inside a loop nested below the owner keeps the tile live until that loop ends.
        let end = blocks.get(depth + 1).map_or(pos, |inner| block_end[*inner]);
        l.last = l.last.max(end);
    }
    for buffer in [Buffer::Sbuf, Buffer::Psum] {
        let mut events: Vec<(usize, i64, TileId)> = Vec::new();
        for (i, l) in live.iter().enumerate() {
            let t = &program.tiles[i];
            // A tile the author placed is the author's to fit.
            if t.buffer != buffer || t.address.is_some() {
                continue;
            }
            let Some(l) = l else { continue };
            let size = match buffer {
                Buffer::Sbuf => t.bytes_per_partition() as i64,
                Buffer::Psum => t.bytes_per_partition().div_ceil(PSUM_BANK_BYTES).max(1) as i64,
            };
            events.push((l.alloc, size, TileId(i as u32)));
            events.push((l.last + 1, -size, TileId(i as u32)));
        }
        // Frees before allocations at the same position.
        events.sort_by_key(|(pos, size, _)| (*pos, *size > 0));
        let limit = match buffer {
            Buffer::Sbuf => program.target.sbuf_bytes_per_partition() as i64,
            Buffer::Psum => PSUM_BANKS as i64,
        };
        let mut total = 0i64;
        let mut live_now: Vec<(i64, TileId)> = Vec::new();
        for (_, size, tile) in events {
            total += size;
            if size > 0 {
                live_now.push((size, tile));
            } else {
                live_now.retain(|&(_, t)| t != tile);
            }
            if size > 0 && total > limit {
                let t = &program.tiles[tile.0 as usize];
                let held = held_by(program, &mut live_now, buffer);
                return Err(match buffer {
                    Buffer::Sbuf => violation(
                        "sbuf-capacity",
                        format!("{limit} B per partition on {}", program.target),
                        format!("{total} B"),
                        format!("alloc {}", describe_tile(t)),
                        format!(
                            "live SBUF tiles need {total} B per partition when {} is allocated \
                             ({held})",
                            t.name
                        ),
                        t.loc,
                    ),
                    Buffer::Psum => violation(
                        "psum-banks-live",
                        format!("{PSUM_BANKS} banks"),
                        format!("{total} banks"),
                        format!("alloc {}", describe_tile(t)),
                        format!(
                            "live PSUM tiles need {total} banks when {} is allocated ({held})",
                            t.name
                        ),
                        t.loc,
                    ),
                });
            }
        }
    }
    Ok(())
}

/// The tiles live at a capacity violation, largest first: each with its size and the line that
/// allocated it (the first eight, then how many more).
fn held_by(program: &Program, live: &mut [(i64, TileId)], buffer: Buffer) -> String {
    live.sort_by_key(|&(size, tile)| (std::cmp::Reverse(size), tile));
    let unit = match buffer {
        Buffer::Sbuf => "B",
        Buffer::Psum => "bank(s)",
    };
    let mut parts: Vec<String> = live
        .iter()
        .take(8)
        .map(|&(size, tile)| {
            let t = &program.tiles[tile.0 as usize];
            format!("{} {size} {unit} from line {}", t.name, t.loc.line)
        })
        .collect();
    if live.len() > 8 {
        parts.push(format!("{} more", live.len() - 8));
    }
    format!("live: {}", parts.join(", "))
}
