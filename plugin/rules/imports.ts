import { dirname, join, relative } from "node:path";
import { escapeInline, escapePath } from "../block/escape.ts";
import { AT_LINE } from "../files/version.ts";
import { isInside } from "../paths.ts";
import { outline, sealed, type MarkdownLine } from "./merge.ts";

/** One file an import inlined. */
export interface ImportedFile {
  /** Real absolute path (imports inside it resolve from its directory). */
  readonly path: string;
  /** Worktree-relative, shown to the model. */
  readonly rel: string;
  /** Its text with any frontmatter stripped: an imported file's frontmatter is never obeyed. */
  readonly body: string;
  readonly sha256: string;
}

/**
 * Reads a file for an import, contained in the worktree AT READ TIME (the caller's, through
 * plugin/files/contained.ts readContained: symlinks are resolved and must stay inside), or says why not.
 */
export type ImportRead = (absolutePath: string) => ImportedFile | ImportRefused;

/** An import not read, and the characters (or bytes) read before it was refused, if any: they count toward MAX_READ_CHARS. */
export interface ImportRefused {
  readonly problem: string;
  readonly read?: number;
}

export interface ImportProblem {
  /** The import as written, e.g. `@../secrets.md`. */
  readonly value: string;
  /** One log line naming the importing file and the value. */
  readonly message: string;
}

export interface Expansion {
  readonly text: string;
  /** Every file inlined, in order: to watch and to hash with the context file. */
  readonly imports: readonly ImportedFile[];
  /** One per importing file and value, at most. */
  readonly problems: readonly ImportProblem[];
}

/** The context file is level 0; files it imports are level 1; a level-5 file's imports are not followed. */
export const MAX_IMPORT_DEPTH = 5;
/** Distinct targets one expansion reads at most: a file of thousands of different imports costs bounded reads. */
export const MAX_IMPORT_TARGETS = 256;
/** Characters of imported text one expansion inlines at most (8 files of the default maxFileBytes). */
export const MAX_IMPORTED_CHARS = 1 << 20;
/**
 * Characters of imported files one expansion reads at most, inlined or not: past MAX_IMPORTED_CHARS
 * each file that does not fit is still read (and hashed, decoded) to learn so, and 256 of them at the
 * default maxFileBytes were 32 MiB an expansion, at every application of the rules.
 */
export const MAX_READ_CHARS = 2 * MAX_IMPORTED_CHARS;

export interface ImportLine {
  /** 1-based. */
  readonly line: number;
  /** The path after `@`. */
  readonly target: string;
  /** Offsets of the whole line in the text, its line break included. */
  readonly start: number;
  readonly end: number;
}

/**
 * `@` at the very start of a line, then the target up to the end of the line (trailing blanks
 * aside): no blank (a mention such as `@john said` is prose), no backtick (inline code is not an
 * import), no control or format character (invisible in the text, and unsafe in a log line).
 */
const IMPORT_LINE = /^@([^\s`\p{Cc}\p{Cf}\p{Z}]+)$/u;

/**
 * A target is path-like when it is explicitly relative (`./`, `../`) or worktree-relative (`/`), or
 * when its file name has an extension: `@docs/style.md`, `@NOTES.txt` are imports; `@john`,
 * `@everyone`, `@types/node` (a package name on a line of its own) are not.
 */
function isPathLike(target: string): boolean {
  if (target.startsWith("/") || target.startsWith("./") || target.startsWith("../")) return true;
  const name = target.slice(target.lastIndexOf("/") + 1);
  const dot = name.lastIndexOf(".");
  return dot > 0 && name[dot - 1] !== "." && EXTENSION.test(name.slice(dot + 1));
}

const EXTENSION = /^[\p{L}\p{N}]+$/u;

/**
 * The import lines of a markdown text: lines that are exactly `@` + a path-like target, outside
 * ``` and ~~~ fences (as the block reads them) and outside inline code spans that run over several
 * lines. Linear in the text.
 */
export function importLines(body: string): ImportLine[] {
  if (!AT_LINE.test(body)) return [];
  const { lines } = outline(body);
  const found: ImportLine[] = [];
  lines.forEach((line, index) => {
    if (line.fenced || body.charCodeAt(line.start) !== 0x40 /* @ */) return;
    const target = IMPORT_LINE.exec(body.slice(line.start, line.end).trimEnd())?.[1];
    if (target !== undefined && isPathLike(target)) found.push({ line: index + 1, target, start: line.start, end: line.end });
  });
  return found.length === 0 ? found : withoutCodeSpans(body, lines, found);
}

/**
 * Inlines the imports of `body`, the text of the context file at real path `filePath`: each import
 * line is replaced by `[imported from <rel>]`, the file's text (its own imports expanded, a fence it
 * leaves open closed) and `[end of <rel>]`. Targets resolve from the importing file's directory, or
 * from `worktree` (real) for `@/…`; a target that leads outside the worktree lexically is refused
 * here, one that leads out through a symlink by `read`. Each file is inlined once: `seen` holds the
 * real paths already in the block (shared across the calls for one block; the context file itself
 * is added), and a later import of one of them, a cycle included, stays as written. A refused,
 * missing or unreadable import, one nested deeper than MAX_IMPORT_DEPTH, or one past
 * MAX_IMPORT_TARGETS or MAX_IMPORTED_CHARS stays as written too, with one problem. Nothing the file
 * says is lost: every line not replaced by an inlined file is kept.
 */
export function expandImports(body: string, filePath: string, worktree: string, read: ImportRead, seen = new Set<string>()): Expansion {
  seen.add(filePath);
  const state: State = { worktree, read, seen, reads: new Map(), chars: 0, charsRead: 0, imports: [], problems: [], reported: new Set() };
  const text = expand(body, filePath, relative(worktree, filePath), 0, state);
  return { text, imports: state.imports, problems: state.problems };
}

interface State {
  readonly worktree: string;
  readonly read: ImportRead;
  readonly seen: Set<string>;
  /** By lexical absolute path: ten thousand imports of one file read it once. */
  readonly reads: Map<string, ImportedFile | ImportRefused>;
  chars: number;
  /** Characters of every file read, inlined or not (MAX_READ_CHARS). */
  charsRead: number;
  readonly imports: ImportedFile[];
  readonly problems: ImportProblem[];
  readonly reported: Set<string>;
}

function expand(body: string, path: string, rel: string, level: number, state: State): string {
  let out = "";
  let copied = 0;
  for (const line of importLines(body)) {
    const inlined = inline(line.target, path, rel, level, state);
    if (inlined === undefined) continue;
    out += body.slice(copied, line.start) + inlined;
    copied = line.end;
  }
  return out === "" ? body : out + body.slice(copied);
}

/** The text that replaces one import line, or undefined when the line stays as written. */
function inline(target: string, path: string, rel: string, level: number, state: State): string | undefined {
  const value = `@${target}`;
  const absolute = resolveTarget(target, dirname(path), state.worktree);
  if (absolute === undefined) return report(state, rel, value, "leads outside the worktree");
  if (level >= MAX_IMPORT_DEPTH) return report(state, rel, value, `is not followed: imports nest ${MAX_IMPORT_DEPTH} levels deep at most`);
  const file = readOnce(state, absolute);
  if (file === TOO_MANY) {
    return report(state, rel, value, `and every later one are not followed: one context file imports ${MAX_IMPORT_TARGETS} paths at most`, "limit");
  }
  if (file === READ_ENOUGH) {
    return report(state, rel, value, `and every later one are not read: the imports of one context file read ${MAX_READ_CHARS} characters at most`, "read");
  }
  if ("problem" in file) return report(state, rel, value, file.problem);
  if (state.seen.has(file.path)) return undefined;
  if (state.chars + file.body.length > MAX_IMPORTED_CHARS) {
    return report(state, rel, value, `is not inlined: the imports of one context file add ${MAX_IMPORTED_CHARS} characters at most`);
  }
  state.seen.add(file.path);
  state.imports.push(file);
  state.chars += file.body.length;
  const text = expand(file.body, file.path, file.rel, level + 1, state);
  const shown = escapePath(file.rel);
  return `[imported from ${shown}]\n${sealed(text, outline(text).openFence)}[end of ${shown}]\n`;
}

/**
 * The absolute path a target names, resolved lexically (`..` included), or undefined when that lies
 * outside the worktree. `@/x` is worktree-relative, so `@/etc/passwd` names `<worktree>/etc/passwd`.
 */
function resolveTarget(target: string, fromDir: string, worktree: string): string | undefined {
  const absolute = join(target.startsWith("/") ? worktree : fromDir, target);
  return isInside(absolute, worktree) ? absolute : undefined;
}

const TOO_MANY = Symbol("past MAX_IMPORT_TARGETS");
const READ_ENOUGH = Symbol("past MAX_READ_CHARS");

/** The read of `absolute`, made once per expansion; none past MAX_IMPORT_TARGETS or MAX_READ_CHARS. */
function readOnce(state: State, absolute: string): ImportedFile | ImportRefused | typeof TOO_MANY | typeof READ_ENOUGH {
  let result = state.reads.get(absolute);
  if (result === undefined) {
    if (state.reads.size >= MAX_IMPORT_TARGETS) return TOO_MANY;
    if (state.charsRead >= MAX_READ_CHARS) return READ_ENOUGH;
    result = state.read(absolute);
    state.reads.set(absolute, result);
    // A file read whole only to be refused (not text, git-ignored where it leads) cost the same read.
    state.charsRead += "problem" in result ? (result.read ?? 0) : result.body.length;
  }
  return result;
}

/** Records one problem per importing file and value (or `once` tag); the import line stays (undefined). */
function report(state: State, rel: string, value: string, reason: string, once = value): undefined {
  const id = `${rel}\u0000${once}`;
  if (state.reported.has(id)) return undefined;
  state.reported.add(id);
  const shown = JSON.stringify(value.length > 120 ? `${value.slice(0, 120)}…` : value);
  state.problems.push({ value, message: `${escapeInline(rel)}: import ${shown} ${reason}; the line is kept as written` });
  return undefined;
}

// ---------------------------------------------------------------------------------------------------
// Inline code over several lines

/**
 * `found` without the lines that lie inside an inline code span opened on an earlier line. A span
 * stays inside one paragraph: a run of lines that are not blank, a heading, fenced, or a fence opener.
 */
function withoutCodeSpans(body: string, lines: readonly MarkdownLine[], found: readonly ImportLine[]): ImportLine[] {
  if (!body.includes("`")) return [...found];
  const kept: ImportLine[] = [];
  let next = 0;
  for (let first = 0; first < lines.length && next < found.length; first++) {
    if (!inParagraph(body, lines, first)) continue;
    let last = first;
    while (last + 1 < lines.length && inParagraph(body, lines, last + 1)) last++;
    const from = lines[first]!.start;
    const to = lines[last]!.end;
    const candidates: ImportLine[] = [];
    while (next < found.length && found[next]!.start < to) candidates.push(found[next++]!);
    if (candidates.length > 0) kept.push(...outsideSpans(candidates, codeSpans(body, from, to)));
    first = last;
  }
  return kept;
}

function inParagraph(body: string, lines: readonly MarkdownLine[], index: number): boolean {
  const line = lines[index]!;
  if (line.fenced || line.level > 0 || lines[index + 1]?.fenced === true) return false;
  return body.slice(line.start, line.end).trim() !== "";
}

/** Both sorted by offset, spans disjoint; a candidate has no backtick, so a span holds it whole or misses it. */
function outsideSpans(candidates: readonly ImportLine[], spans: readonly (readonly [number, number])[]): ImportLine[] {
  let span = 0;
  return candidates.filter(({ start }) => {
    while (span < spans.length && spans[span]![1] <= start) span++;
    const around = spans[span];
    return around === undefined || around[0] > start;
  });
}

/**
 * CommonMark code spans of `text[from, to)`: a run of n backticks opens one that the next run of
 * exactly n closes; a run with no such closer is literal. A backslash escapes an opener's first
 * backtick (inside a span a backslash is literal, so closers ignore them). Linear but for a log factor.
 */
function codeSpans(text: string, from: number, to: number): [number, number][] {
  const runs: { at: number; length: number }[] = [];
  for (let at = text.indexOf("`", from); at !== -1 && at < to; at = text.indexOf("`", at)) {
    const start = at;
    while (at < to && text.charCodeAt(at) === 0x60) at++;
    runs.push({ at: start, length: at - start });
  }
  const byLength = new Map<number, number[]>();
  runs.forEach(({ length }, index) => {
    const list = byLength.get(length);
    if (list === undefined) byLength.set(length, [index]);
    else list.push(index);
  });
  const spans: [number, number][] = [];
  for (let index = 0; index < runs.length; index++) {
    let { at, length } = runs[index]!;
    if (escaped(text, at, from)) {
      at++;
      length--;
    }
    const closer = firstAfter(byLength.get(length), index);
    if (length === 0 || closer === undefined) continue;
    spans.push([at, runs[closer]!.at + length]);
    index = closer;
  }
  return spans;
}

/** An odd number of backslashes right before `at` (not before `from`). */
function escaped(text: string, at: number, from: number): boolean {
  let count = 0;
  while (at - count - 1 >= from && text.charCodeAt(at - count - 1) === 0x5c /* \ */) count++;
  return count % 2 === 1;
}

/** The first index in sorted `indexes` greater than `after`. */
function firstAfter(indexes: readonly number[] | undefined, after: number): number | undefined {
  if (indexes === undefined) return undefined;
  let low = 0;
  let high = indexes.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (indexes[middle]! <= after) low = middle + 1;
    else high = middle;
  }
  return indexes[low];
}
