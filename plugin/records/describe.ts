import { knownTokens, tokensExact } from "../block/compose.ts";
import type { FileVersion } from "../files/contained.ts";
import type { Mode, Ruled } from "../rules/apply.ts";
import { SYSTEM_CARRIER, type Known, type Session } from "../session/session.ts";
import type { RenderedEntry } from "../block/render.ts";
import { recordJson, type FileRecord } from "./format.ts";

const TOUCHED: Mode = Object.freeze({ mode: "touched" });
const MANUAL: Mode = Object.freeze({ mode: "manual" });

/** What one file's line of a record is made from, taken at the step (all immutable values). */
export interface FileSnapshot {
  readonly file: FileVersion;
  readonly known: Known | undefined;
  readonly entry: RenderedEntry | undefined;
  readonly host: boolean;
  readonly unloaded: boolean;
  readonly mode: Mode;
  readonly level: FileRecord["level"];
}

/** The step's view of every file of the session's hierarchy: cheap (references only); `describe` does the work later. */
export function snapshotFiles(session: Session, hierarchy: Ruled, realRoot: string): FileSnapshot[] {
  return hierarchy.files.map((file) => ({
    file,
    known: session.known(file.path),
    entry: session.systemEntries.get(file.path),
    host: session.hostPaths.has(file.path),
    unloaded: session.unloaded.has(file.path),
    mode: hierarchy.modes.get(file.path) ?? (hierarchy.manual.has(file.path) ? MANUAL : TOUCHED),
    level: file.dir === realRoot ? "root" : hierarchy.closest.has(file.path) ? "direct" : "parent",
  }));
}

/**
 * A session's last record entry of each file as JSON, and what it was made from: a step that changed
 * one file of 2,000 makes one entry again. Per session, as the `known` a snapshot compares is.
 */
export type EntryMemo = WeakMap<FileVersion, { readonly snapshot: FileSnapshot; readonly delivery: string; readonly exact: boolean; readonly json: string }>;

/** The record entry of `snapshot` as JSON (see describe), made again only when something it depends on changed (its counts becoming exact too). */
export function describeJson(snapshot: FileSnapshot, delivery: "stable" | "system", memo: EntryMemo): string {
  const known = memo.get(snapshot.file);
  const exact = tokensExact(snapshot.file);
  if (known !== undefined && known.delivery === delivery && known.exact === exact && sameFile(known.snapshot, snapshot)) return known.json;
  const json = recordJson(describe(snapshot, delivery));
  memo.set(snapshot.file, { snapshot, delivery, exact, json });
  return json;
}

/** Two snapshots of a file that give the same entry. */
export function sameFile(x: FileSnapshot, y: FileSnapshot): boolean {
  return x.file === y.file && x.known === y.known && x.entry === y.entry && x.host === y.host && x.unloaded === y.unloaded && x.level === y.level && x.mode.mode === y.mode.mode && x.mode.score === y.mode.score;
}

/** What the request has of each file, and why: the records' and the `list` action's one truth. */
export function describe(snapshot: FileSnapshot, delivery: "stable" | "system"): FileRecord {
  const { file, known, entry } = snapshot;
  const total = knownTokens(file);
  const { mode, score } = snapshot.mode;
  // The hash of the bytes on disk, also for a version whose text imports or merging changed.
  const base = { path: file.rel, sha256: (file.source ?? file).sha256, total, mode, ...(score === undefined ? {} : { score }), level: snapshot.level } as const;
  if (snapshot.unloaded) return { ...base, tokens: 0, state: "unloaded", reason: "unloaded with project_context; back when a tool call touches its directory" };
  if (snapshot.host) return { ...base, tokens: 0, state: "host", reason: "OpenCode's own prompt carries it" };
  const older = known !== undefined && known.sha256 !== file.sha256 ? { reason: "the request has an older version; the new text rides on the next tool output or message" } : {};
  if (known !== undefined && (delivery === "stable" || known.carrier !== SYSTEM_CARRIER)) {
    const place = known.carrier === SYSTEM_CARRIER ? "system" : "conversation";
    if (known.held === "whole") return { ...base, tokens: total, state: place, ...older };
    if (known.held === "cut") {
      const tokens = known.tokens ?? 0;
      return { ...base, tokens, state: "cut", left: Math.max(0, total - tokens), ...older };
    }
    return { ...base, tokens: 0, state: "omitted", reason: "over the budget: named only, sent when a tool call reaches its directory" };
  }
  if (entry?.state === "whole") return { ...base, tokens: total, state: "system" };
  if (entry?.state === "cut") {
    const tokens = entry.sentTokens ?? 0;
    return { ...base, tokens, state: "cut", left: Math.max(0, total - tokens) };
  }
  if (entry !== undefined) return { ...base, tokens: 0, state: "omitted", reason: "over the budget: named only" };
  return { ...base, tokens: 0, state: "omitted", reason: "not delivered yet: it rides on the next tool output or message" };
}
