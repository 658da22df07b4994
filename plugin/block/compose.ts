import type { FileVersion } from "../files/contained.ts";
import type { Logger } from "../log.ts";
import { toDoc, type Doc } from "./doc.ts";
import { plan, type BlockKind, type PlanItem } from "./plan.ts";
import { renderPieces, renderedEntries, sectionHead, WHOLE_TAIL, type RenderedEntry } from "./render.ts";
import { countUnits, textBound, unitBound } from "./tokens.ts";

export type { BlockKind } from "./plan.ts";

export interface Composed {
  /** The block, or "" when there is nothing to give. */
  readonly text: string;
  /** Its tokens: exact counts for file text where known, the provable bound elsewhere. */
  readonly tokens: number;
  readonly entries: readonly RenderedEntry[];
}

export interface ComposeExtras {
  /** delivery: files sent again because their text changed. */
  readonly updated?: ReadonlySet<string>;
  /** delivery: worktree-relative paths of delivered files deleted since. */
  readonly deleted?: readonly string[];
}

/** A file version's doc is a value derived from an immutable record: made once, kept as long as the record lives. */
const docs = new WeakMap<FileVersion, Doc>();
/** Exact per-unit counts of a doc, once asked for (counting happens in a separate process). */
const counts = new WeakMap<Doc, Int32Array>();
const counting = new WeakMap<Doc, Promise<Int32Array>>();

export function docOf(file: FileVersion): Doc {
  let doc = docs.get(file);
  if (doc === undefined) docs.set(file, (doc = toDoc(file.path, file.rel, file.body)));
  return doc;
}

/** The exact text a whole file has in any block: how a continued session recognises what its conversation still holds. */
export function wholeSection(file: FileVersion): string {
  const doc = docOf(file);
  return `${sectionHead(doc.rel, false)}${doc.units.join("")}${WHOLE_TAIL}`;
}

/** The file's exact token count (for `explain`). */
export async function tokensOf(file: FileVersion): Promise<number> {
  return (await countsOf(docOf(file))).reduce((sum, count) => sum + count, 0);
}

/**
 * The block of `kind` for `items` (priority order) within `budget`. Exact counts are fetched only for
 * the docs the plan says it needs, so a block that provably fits costs no tokenizer at all; the
 * result is the same bytes whichever counts were already known.
 */
export async function compose(
  kind: BlockKind,
  items: readonly { file: FileVersion; tier: number }[],
  budget: number,
  log: Logger,
  extras: ComposeExtras = {},
): Promise<Composed> {
  const planItems = (): PlanItem[] =>
    items.map(({ file, tier }) => {
      const doc = docOf(file);
      const known = counts.get(doc);
      return known === undefined ? { doc, tier } : { doc, tier, counts: known };
    });
  for (;;) {
    const input = { kind, items: planItems(), budget, frame: textBound, ...extras };
    const result = plan(input);
    if ("need" in result) {
      try {
        await Promise.all(result.need.map(countsOf));
      } catch (error) {
        log.once(`count:${String(error)}`, "error", `could not count tokens, so no ${kind} block this time: ${String(error)}`);
        return { text: "", tokens: 0, entries: [] };
      }
      continue;
    }
    const pieces = renderPieces(input, result);
    let tokens = 0;
    for (const piece of pieces) {
      if (piece.item === undefined) tokens += textBound(piece.text);
      else tokens += contentTokens(input.items[piece.item]!, piece.units ?? 0);
    }
    return { text: pieces.map((piece) => piece.text).join(""), tokens, entries: renderedEntries(input, result) };
  }
}

function contentTokens(item: PlanItem, units: number): number {
  let tokens = 0;
  for (let i = 0; i < units; i++) tokens += item.counts?.[i] ?? unitBound(item.doc.units[i]!);
  return tokens;
}

function countsOf(doc: Doc): Promise<Int32Array> {
  const known = counts.get(doc);
  if (known !== undefined) return Promise.resolve(known);
  let pending = counting.get(doc);
  if (pending === undefined) {
    pending = countUnits(doc.units).then(
      (result) => {
        counts.set(doc, result);
        counting.delete(doc);
        return result;
      },
      (error: unknown) => {
        counting.delete(doc);
        throw error;
      },
    );
    counting.set(doc, pending);
  }
  return pending;
}
