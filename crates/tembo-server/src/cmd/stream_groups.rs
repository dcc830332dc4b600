//! placeholder
use super::Spec;
use crate::blocking::BlockOp;
use crate::exec::Ctx;
use crate::resp::Reply;
pub const COMMANDS: &[Spec] = &[];
pub(super) fn serve(_cx: &mut Ctx, _key: &[u8], _op: &BlockOp) -> Option<Reply> {
    None
}
