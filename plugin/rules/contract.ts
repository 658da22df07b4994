/**
 * The rules contract: what a context file's frontmatter asks for (when it loads, for which agents,
 * how much it matters against the budget, how it merges, what it keeps an eye on), validated.
 * Pure: no I/O. Frontmatter is repository content, so every value is untrusted: a bad value gives
 * one problem naming its key and the value, and the file behaves as if that key were absent.
 */
import { KNOWN_KEYS } from "../files/frontmatter.ts";
import type { IncludeMode } from "../records/format.ts";
import { isHighSurrogate } from "../strings.ts";

export type Priority = "critical" | "high" | "normal" | "low";
export type MergeMode = "append" | "override" | "sections";

export interface ContractProblem {
  /** The frontmatter key as written (an alias such as `globs` is named as itself). */
  readonly key: string;
  /** The key's raw value. */
  readonly value: unknown;
  /** What is wrong and what was done instead; values in it are already shown safely. */
  readonly message: string;
}

export interface Contract {
  readonly include: IncludeMode;
  /** Whether `include` (or Cursor's `alwaysApply`) set the mode: false when it is the default, "touched". */
  readonly modeGiven: boolean;
  /** One line; undefined when not given. */
  readonly description: string | undefined;
  /** Globs relative to the file's directory, as given; undefined = no restriction. */
  readonly paths: readonly string[] | undefined;
  /** undefined = every agent. */
  readonly agents: readonly string[] | undefined;
  readonly excludeAgents: readonly string[];
  readonly priority: Priority;
  readonly merge: MergeMode;
  /** Worktree-relative globs. */
  readonly watch: readonly string[];
  /** Keys this plugin and its peers do not know, for explain. */
  readonly unknownKeys: readonly string[];
  readonly problems: readonly ContractProblem[];
}

const INCLUDE_MODES: readonly IncludeMode[] = ["touched", "always", "manual", "agent"];
const PRIORITIES: readonly Priority[] = ["critical", "high", "normal", "low"];
const MERGE_MODES: readonly MergeMode[] = ["append", "override", "sections"];

/** Items in one list value: far above any real rule file, low enough that a hostile list costs nothing. */
export const MAX_LIST_ITEMS = 64;
/**
 * Characters of one key's globs once `{…}` alternatives are expanded. Matching costs at most this
 * times the path's length, so it bounds the time of every match (and of expanding a brace bomb).
 */
export const MAX_GLOB_CHARS = 2048;
/** A description is shown in lists: one line of about a tweet. */
export const MAX_DESCRIPTION_CHARS = 300;
/** Linux's PATH_MAX: no longer path exists, and matching time is proportional to it. */
const MAX_MATCH_PATH_CHARS = 4096;
/** A value in a log line. */
const MAX_SHOWN_CHARS = 80;
/** Unknown keys a contract names at most (for `explain`). */
const MAX_UNKNOWN_KEYS = 10;

export const DEFAULT_CONTRACT: Contract = Object.freeze({
  include: "touched",
  modeGiven: false,
  description: undefined,
  paths: undefined,
  agents: undefined,
  excludeAgents: Object.freeze([]),
  priority: "normal",
  merge: "append",
  watch: Object.freeze([]),
  unknownKeys: Object.freeze([]),
  problems: Object.freeze([]),
});

type Frontmatter = Readonly<Record<string, unknown>>;

/** readContract is called on every step: one contract per frontmatter object (FileVersion keeps it). */
const contracts = new WeakMap<Frontmatter, Contract>();

/** The contract of a parsed frontmatter mapping (`{}` when the file has none). Never throws. */
export function readContract(frontmatter: Frontmatter): Contract {
  let contract = contracts.get(frontmatter);
  if (contract === undefined) {
    // Most files have no frontmatter: the one default, so that a plain hierarchy is told by identity.
    contract = Object.keys(frontmatter).length === 0 ? DEFAULT_CONTRACT : buildContract(frontmatter);
    contracts.set(frontmatter, contract);
  }
  return contract;
}

/**
 * Whether a touched path, relative to the file's directory and `/`-separated, lets the file load.
 * No `paths` = any path inside the directory; a path leaving it (`..`, absolute) never matches.
 */
export function matchesPaths(contract: Contract, relToFileDir: string): boolean {
  const globs = compiledGlobs(contract).paths;
  if (globs === undefined) return !relToFileDir.startsWith("/") && !relToFileDir.split("/").includes("..");
  return matchesGlobSet(globs, relToFileDir);
}

/** Steps of matching a caller allows itself (see matchSequence): once spent (`left < 0`), answers mean nothing. */
export interface MatchWork {
  left: number;
}

/** Whether a worktree-relative, `/`-separated path is one the file keeps an eye on (within `work`, when given). */
export function matchesWatch(contract: Contract, relToWorktree: string, work?: MatchWork): boolean {
  const globs = compiledGlobs(contract).watch;
  return globs !== undefined && matchesGlobSet(globs, relToWorktree, work);
}

/**
 * A matcher of worktree-relative paths for a list of globs given as an option (`rules`), in the
 * frontmatter's syntax and with its bounded matching: a path matches one glob and no `!` one (a list of
 * exclusions alone matches nothing). Each glob that does not parse or leaves the worktree is passed to
 * `refused` with the reason, and left out; `kept` lists the others.
 */
export function optionGlobs(globs: readonly string[], refused: (reason: string) => void): { readonly matches: (rel: string) => boolean; readonly kept: readonly string[] } {
  const kept: string[] = [];
  const include: Pattern[] = [];
  const exclude: Pattern[] = [];
  for (const glob of globs) {
    try {
      const set = compileGlobSet([glob], "the worktree");
      include.push(...set.include);
      exclude.push(...set.exclude);
      kept.push(glob);
    } catch (error) {
      if (!(error instanceof GlobError)) throw error;
      refused(error.message);
    }
  }
  const set: GlobSet = Object.freeze({ include, exclude });
  return { matches: (rel) => include.length > 0 && matchesGlobSet(set, rel), kept };
}

/** Listed in `agents` (when given) and not in `exclude_agents`: exclusion wins. Names match exactly. */
export function appliesToAgent(contract: Contract, agent: string): boolean {
  return (contract.agents === undefined || contract.agents.includes(agent)) && !contract.excludeAgents.includes(agent);
}

/** The problem's one log line, safe to print: `AGENTS.md: frontmatter "include": unknown mode "sometimes" (…); ignored`. */
export function describeProblem(rel: string, problem: ContractProblem): string {
  return escapeUnsafe(`${rel}: frontmatter ${show(problem.key)}: ${problem.message}`);
}

// ---------------------------------------------------------------------------------------------
// Reading the keys

type Checked<T> = { readonly ok: true; readonly value: T; readonly note?: string } | { readonly ok: false; readonly message: string };

const ok = <T>(value: T, note?: string): Checked<T> => (note === undefined ? { ok: true, value } : { ok: true, value, note });
const bad = (message: string): { readonly ok: false; readonly message: string } => ({ ok: false, message });

interface Resolved<T> {
  readonly key: string;
  readonly raw: unknown;
  readonly value: T;
}

/** Blank after trimming, line breaks included (JavaScript's `\s` lacks NEL). */
const BLANK = /^[\s\x85]*$/;
const LINE_BREAK = /\r\n|[\n\v\f\r\x85\u2028\u2029]/;

/**
 * A key's value; undefined when the key is absent or left empty (`key:`, `""`, `[]`): Cursor's own
 * template leaves `description:` and `globs:` empty, and empty says nothing. Own keys only, so that
 * `constructor` or `__proto__` never reads Object.prototype.
 */
function given(frontmatter: Frontmatter, key: string): unknown {
  if (!Object.hasOwn(frontmatter, key)) return undefined;
  const value = frontmatter[key];
  if (value === null || value === undefined) return undefined;
  if (typeof value === "string" && BLANK.test(value)) return undefined;
  if (Array.isArray(value) && value.length === 0) return undefined;
  return value;
}

/**
 * The first of `keys` (a key, then its aliases) whose value passes `check`. A present key that fails
 * is reported and skipped, as if absent; a present key after the one used is reported as ignored.
 */
function resolve<T>(
  frontmatter: Frontmatter,
  keys: readonly string[],
  check: (value: unknown, key: string) => Checked<T>,
  problems: ContractProblem[],
): Resolved<T> | undefined {
  let used: Resolved<T> | undefined;
  for (const key of keys) {
    const raw = given(frontmatter, key);
    if (raw === undefined) continue;
    if (used !== undefined) {
      problems.push({ key, value: raw, message: `ignored: ${show(used.key)} is given` });
      continue;
    }
    const checked = check(raw, key);
    if (!checked.ok) problems.push({ key, value: raw, message: `${checked.message}; ignored` });
    else {
      used = { key, raw, value: checked.value };
      if (checked.note !== undefined) problems.push({ key, value: raw, message: checked.note });
    }
  }
  return used;
}

function buildContract(frontmatter: Frontmatter): Contract {
  const problems: ContractProblem[] = [];
  const description = resolve(frontmatter, ["description"], checkDescription, problems);
  const paths = resolve(frontmatter, ["paths", "globs", "applyTo"], checkGlobs("this file's directory"), problems);
  const include = resolve(
    frontmatter,
    ["include", "alwaysApply"],
    (value, key) => (key === "include" ? checkChoice(INCLUDE_MODES, "mode")(value) : checkAlwaysApply(value, paths !== undefined, description !== undefined)),
    problems,
  );
  const mode = include?.value ?? "touched";
  if (include?.key === "include" && mode === "agent" && description === undefined) {
    problems.push({ key: "include", value: include.raw, message: `"agent" without a "description": it ranks on the text alone` });
  }
  const pathsApply = paths !== undefined && mode === "touched";
  if (paths !== undefined && !pathsApply) {
    problems.push({ key: paths.key, value: paths.raw, message: `${show(paths.raw)} applies only to include: touched (this file is ${mode}); ignored` });
  }
  const agents = resolve(frontmatter, ["agents", "apply_to"], checkList, problems);
  const excludeAgents = resolve(frontmatter, ["exclude_agents"], checkList, problems);
  const priority = resolve(frontmatter, ["priority"], checkChoice(PRIORITIES, "priority"), problems);
  const merge = resolve(frontmatter, ["merge"], checkChoice(MERGE_MODES, "merge mode"), problems);
  const watch = resolve(frontmatter, ["watch"], checkGlobs("the worktree"), problems);
  const contract: Contract = Object.freeze({
    include: mode,
    modeGiven: include !== undefined,
    description: description?.value,
    paths: pathsApply ? paths.value.globs : undefined,
    agents: agents?.value,
    excludeAgents: excludeAgents?.value ?? DEFAULT_CONTRACT.excludeAgents,
    priority: priority?.value ?? DEFAULT_CONTRACT.priority,
    merge: merge?.value ?? DEFAULT_CONTRACT.merge,
    watch: watch?.value.globs ?? DEFAULT_CONTRACT.watch,
    // The first few, each cut: a file can hold thousands of keys, and a key can be as long as its file.
    unknownKeys: Object.keys(frontmatter)
      .filter((key) => !KNOWN_KEYS.has(key))
      .slice(0, MAX_UNKNOWN_KEYS)
      .map((key) => cut(key, MAX_SHOWN_CHARS)),
    problems: problems.map((problem) => Object.freeze(problem)),
  });
  compiled.set(contract, { paths: pathsApply ? paths.value.set : undefined, watch: watch?.value.set });
  return contract;
}

const checkChoice =
  <T extends string>(choices: readonly T[], noun: string) =>
  (value: unknown): Checked<T> => {
    const choice = choices.find((candidate) => typeof value === "string" && value.trim() === candidate);
    if (choice !== undefined) return ok(choice);
    return bad(typeof value === "string" ? `unknown ${noun} ${show(value)} (${choices.join(", ")})` : `expects one of ${choices.join(", ")}, got ${show(value)}`);
  };

/**
 * Cursor's rule types: `alwaysApply: true` is Always; with `false`, globs make it Auto Attached
 * (touched), a description alone Agent Requested (agent), and nothing at all Manual.
 */
function checkAlwaysApply(value: unknown, hasPaths: boolean, hasDescription: boolean): Checked<IncludeMode> {
  if (typeof value !== "boolean") return bad(`expects true or false, got ${show(value)}`);
  if (value) return ok("always");
  return ok(hasPaths ? "touched" : hasDescription ? "agent" : "manual");
}

/** One line: a longer text keeps its first non-blank line, cut to MAX_DESCRIPTION_CHARS, and says so. */
function checkDescription(value: unknown): Checked<string> {
  if (typeof value !== "string") return bad(`expects one line of text, got ${show(value)}`);
  const lines = value.split(LINE_BREAK).filter((line) => !BLANK.test(line));
  const first = lines[0]?.trim() ?? "";
  const kept = cut(first, MAX_DESCRIPTION_CHARS);
  const changes = [lines.length > 1 ? "only the first of its lines is kept" : "", kept !== first ? `cut to ${MAX_DESCRIPTION_CHARS} characters` : ""];
  const note = changes.filter((change) => change !== "").join(", ");
  return ok(kept, note === "" ? undefined : `is not one short line: ${note}`);
}

/**
 * A list: a YAML list of non-blank strings, or one string of comma-separated items (Cursor's
 * `globs` and Copilot's `applyTo` are written so; commas inside `{…}` and `[…]` do not separate).
 * Items are trimmed; blank pieces of a string (a trailing comma) are dropped.
 */
function checkList(value: unknown): Checked<readonly string[]> {
  if (typeof value === "string") {
    const items = splitList(value);
    return items.length > MAX_LIST_ITEMS ? bad(`has more than ${MAX_LIST_ITEMS} items`) : ok(items);
  }
  if (!Array.isArray(value)) return bad(`expects a string or a list of strings, got ${show(value)}`);
  if (value.length > MAX_LIST_ITEMS) return bad(`has ${value.length} items, more than ${MAX_LIST_ITEMS}`);
  const items: string[] = [];
  for (const [index, item] of value.entries()) {
    if (typeof item !== "string") return bad(`item ${index + 1} is ${show(item)}, not a string`);
    if (BLANK.test(item)) return bad(`item ${index + 1} is blank`);
    items.push(item.trim());
  }
  return ok(items);
}

function splitList(text: string): string[] {
  const items: string[] = [];
  let depth = 0;
  let start = 0;
  // False from a `[` that closes no class up to the next `/` (where classEnd stops): no `[` in between
  // can close one either, and looking again from each made 100,000 of them a 10 s scan.
  let closable = true;
  for (let at = 0; at < text.length; at++) {
    const char = text[at];
    if (char === "\\") at++;
    else if (char === "/") closable = true;
    else if (char === "[" && closable) {
      const end = classEnd(text, at);
      if (end === -1) closable = false;
      else at = end;
    }
    else if (char === "{") depth++;
    else if (char === "}" && depth > 0) depth--;
    else if (char === "," && depth === 0) {
      items.push(text.slice(start, at));
      start = at + 1;
    }
  }
  items.push(text.slice(start));
  return items.filter((item) => !BLANK.test(item)).map((item) => item.trim());
}

interface GlobList {
  readonly globs: readonly string[];
  readonly set: GlobSet;
}

/** A list of globs, every one strict; `base` names what they are relative to, for the messages. */
const checkGlobs =
  (base: string) =>
  (value: unknown): Checked<GlobList> => {
    const list = checkList(value);
    if (!list.ok) return list;
    try {
      return ok({ globs: list.value, set: compileGlobSet(list.value, base) });
    } catch (error) {
      if (error instanceof GlobError) return bad(error.message);
      throw error;
    }
  };

// ---------------------------------------------------------------------------------------------
// Globs
//
// Matched here rather than by picomatch: its regular expressions backtrack, and one glob from a
// hostile file (`*a*a*a*b` on a long file name, a few `**` on a deep path) took seconds to minutes
// per match (measured). These matchers take time proportional to pattern length times path length.
// The syntax is picomatch's common subset, parsed strictly: `*`, `**` (a whole segment), `?`,
// `[…]` (`!`/`^`, ranges, `\` escapes), `{a,b}` (nested), `\` escapes, and a leading `!` that makes
// the glob an exclusion. Extglobs and `(…)` groups, POSIX classes, `{a}` and `{1..3}` are refused.

/** `?`, and `*` (any run of characters within a segment); other numbers are code points. */
const ANY_CHAR = -1;
const ANY_RUN = -2;

interface CharClass {
  readonly negated: boolean;
  /** Inclusive code point pairs: [lo, hi, lo, hi, …]. */
  readonly ranges: readonly number[];
}

type CharToken = number | CharClass;
/** `**`: any number of whole segments, none included. */
const GLOBSTAR = Symbol("**");
type SegmentPattern = readonly CharToken[] | typeof GLOBSTAR;
/** One brace alternative of a glob, segment by segment. */
type Pattern = readonly SegmentPattern[];

interface GlobSet {
  /** A path matches one of these (any path when there are none: a list of exclusions only)… */
  readonly include: readonly Pattern[];
  /** …and none of these. */
  readonly exclude: readonly Pattern[];
}

/** A glob that does not parse, or that can only point outside `base`: the message says which. */
class GlobError extends Error {}

interface CompiledGlobs {
  /** undefined: no restriction. */
  readonly paths: GlobSet | undefined;
  /** undefined: nothing watched. */
  readonly watch: GlobSet | undefined;
}

/** The compiled globs of every contract readContract made (and, lazily, of hand-made ones). */
const compiled = new WeakMap<Contract, CompiledGlobs>();

function compiledGlobs(contract: Contract): CompiledGlobs {
  let globs = compiled.get(contract);
  if (globs === undefined) {
    // A contract built by hand (tests, tools) rather than read: its globs must be valid, or this throws.
    globs = {
      paths: contract.paths === undefined ? undefined : compileGlobSet(contract.paths, "this file's directory"),
      watch: contract.watch.length === 0 ? undefined : compileGlobSet(contract.watch, "the worktree"),
    };
    compiled.set(contract, globs);
  }
  return globs;
}

function compileGlobSet(globs: readonly string[], base: string): GlobSet {
  const budget = { left: MAX_GLOB_CHARS };
  const include: Pattern[] = [];
  const exclude: Pattern[] = [];
  for (const glob of globs) {
    try {
      const text = glob.normalize("NFC");
      const bangs = /^!*/.exec(text)?.[0].length ?? 0; // each leading `!` negates, as in picomatch
      const body = text.slice(bangs);
      if (body === "") throw new GlobError("is empty");
      if (body.length > budget.left) throw new GlobError(`makes the list longer than ${MAX_GLOB_CHARS} characters`);
      (bangs % 2 === 1 ? exclude : include).push(...expandBraces(body, budget).map((variant) => parsePattern(variant, base)));
    } catch (error) {
      if (error instanceof GlobError) throw new GlobError(`glob ${show(glob)} ${error.message}`);
      throw error;
    }
  }
  return Object.freeze({ include, exclude });
}

/**
 * The alternatives of `{a,b}` groups (nested, empty alternatives allowed), as globs without
 * braces. Escapes and classes are copied verbatim for parsePattern. Every character produced,
 * intermediate ones included, and one more per variant, is charged to `budget`: neither
 * `{a,b}{a,b}…` nor `{,}{,}…` (variants of no characters) can explode.
 */
function expandBraces(text: string, budget: { left: number }): string[] {
  return expandFrom(text, 0, false, budget).variants;
}

function expandFrom(text: string, from: number, nested: boolean, budget: { left: number }): { variants: string[]; end: number } {
  let variants = [""];
  let literalFrom = from;
  const append = (suffixes: readonly string[]): void => {
    // Each variant costs one more than its length: empty ones (`{,}{,}…`) would double for free.
    const size = variants.reduce((sum, variant) => sum + suffixes.reduce((total, suffix) => total + variant.length + suffix.length + 1, 0), 0);
    budget.left -= size;
    if (budget.left < 0) throw new GlobError(`expands past ${MAX_GLOB_CHARS} characters`);
    variants = variants.flatMap((variant) => suffixes.map((suffix) => variant + suffix));
  };
  let at = from;
  while (at < text.length) {
    const char = text[at];
    if (char === "\\") at += 2;
    else if (char === "[") at = classEnd(text, at) + 1 || text.length; // an unclosed `[` is parsePattern's to report
    else if (nested && (char === "," || char === "}")) break;
    else if (char === "}") throw new GlobError("does not parse: } without {");
    else if (char === "{") {
      if (at > literalFrom) append([text.slice(literalFrom, at)]);
      const alternatives: string[] = [];
      let commas = 0;
      for (at++; ; at++) {
        const part = expandFrom(text, at, true, budget);
        alternatives.push(...part.variants);
        at = part.end;
        if (at >= text.length) throw new GlobError("does not parse: { is never closed");
        if (text[at] === "}") break;
        commas++;
      }
      if (commas === 0) throw new GlobError("does not parse: {…} without a comma (write \\{ for a literal {)");
      append(alternatives);
      literalFrom = ++at;
    } else at++;
  }
  const end = Math.min(at, text.length);
  if (end > literalFrom) append([text.slice(literalFrom, end)]);
  return { variants, end };
}

/** One brace-free alternative, relative to `base`: refused when it could only point outside it. */
function parsePattern(variant: string, base: string): Pattern {
  const text = variant.startsWith("./") ? variant.slice(2) : variant;
  if (text.startsWith("/")) throw new GlobError(`starts with /: globs are relative to ${base}`);
  return text.split("/").map((segment) => {
    if (segment === "..") throw new GlobError(`has a .. segment: it could only point outside ${base}`);
    if (segment === "" || segment === ".") throw new GlobError("has an empty or . segment (write dir/** for everything under dir)");
    return segment === "**" ? GLOBSTAR : parseSegment(segment);
  });
}

function parseSegment(segment: string): CharToken[] {
  const tokens: CharToken[] = [];
  for (let at = 0; at < segment.length; ) {
    const char = segment[at];
    if (char === "[") {
      const close = classEnd(segment, at);
      if (close === -1) throw new GlobError("does not parse: [ is never closed (write \\[ for a literal [)");
      tokens.push(parseClass(segment, at + 1, close));
      at = close + 1;
      continue;
    }
    if (char === "]") throw new GlobError("does not parse: ] without [");
    if (char === "(" || char === ")") throw new GlobError("does not parse: ( ) groups and extglobs are not supported (write \\( for a literal ()");
    if (char === "*") {
      if (tokens.at(-1) !== ANY_RUN) tokens.push(ANY_RUN);
      at++;
    } else if (char === "?") {
      tokens.push(ANY_CHAR);
      at++;
    } else {
      const [code, next] = readCodePoint(segment, at);
      tokens.push(code);
      at = next;
    }
  }
  return tokens;
}

/** Index of the `]` closing the class opened at `open`, or -1. A first `]` is a member; a class never spans `/`. */
function classEnd(text: string, open: number): number {
  let at = open + 1;
  if (text[at] === "!" || text[at] === "^") at++;
  if (text[at] === "]") at++;
  for (; at < text.length; at++) {
    const char = text[at];
    if (char === "\\") at++;
    else if (char === "]") return at;
    else if (char === "/") return -1;
  }
  return -1;
}

/** The members of a class between `from` (after its `[`) and `close`. */
function parseClass(segment: string, from: number, close: number): CharClass {
  let at = from;
  const negated = segment[at] === "!" || segment[at] === "^";
  if (negated) at++;
  const ranges: number[] = [];
  while (at < close) {
    if (segment.startsWith("[:", at)) throw new GlobError("does not parse: POSIX classes such as [:alpha:] are not supported");
    const [lo, afterLo] = readCodePoint(segment, at);
    if (segment[afterLo] === "-" && afterLo + 1 < close) {
      const [hi, afterHi] = readCodePoint(segment, afterLo + 1);
      if (hi < lo) throw new GlobError(`does not parse: the range ${String.fromCodePoint(lo)}-${String.fromCodePoint(hi)} is empty`);
      ranges.push(lo, hi);
      at = afterHi;
    } else {
      ranges.push(lo, lo);
      at = afterLo;
    }
  }
  return { negated, ranges };
}

/** The code point at `at` (the escaped one after a `\`) and the index after it. */
function readCodePoint(text: string, at: number): [code: number, next: number] {
  const escaped = text[at] === "\\";
  const start = escaped ? at + 1 : at;
  const code = text.codePointAt(start);
  if (code === undefined) throw new GlobError("does not parse: it ends with a lone \\");
  return [code, start + (code > 0xffff ? 2 : 1)];
}

function matchesGlobSet(globs: GlobSet, rel: string, work?: MatchWork): boolean {
  const segments = pathSegments(rel);
  if (segments === undefined) return false;
  const matches = (pattern: Pattern): boolean => matchesPattern(pattern, segments, work);
  return (globs.include.length === 0 || globs.include.some(matches)) && !globs.exclude.some(matches);
}

/**
 * A normalized relative path's segments as code points (NFC, so a macOS NFD name matches the glob
 * its author typed); undefined for the directory itself, a path leaving it, or one no file can have.
 */
function pathSegments(rel: string): (readonly number[])[] | undefined {
  if (rel === "" || rel.length > MAX_MATCH_PATH_CHARS) return undefined;
  const segments = rel.normalize("NFC").split("/");
  if (segments.some((segment) => segment === "" || segment === "." || segment === "..")) return undefined;
  return segments.map((segment) => Array.from(segment, (char) => char.codePointAt(0) ?? 0));
}

function matchesPattern(pattern: Pattern, segments: readonly (readonly number[])[], work?: MatchWork): boolean {
  return matchSequence(pattern, segments.length, (segment) => segment === GLOBSTAR, (segment, at) => {
    const chars = segments[at] ?? [];
    return segment !== GLOBSTAR && matchSequence(segment, chars.length, (token) => token === ANY_RUN, (token, i) => matchesChar(token, chars[i] ?? -1), work);
  }, work);
}

function matchesChar(token: CharToken, code: number): boolean {
  if (typeof token === "number") return token === ANY_CHAR || token === code;
  let member = false;
  for (let i = 0; i + 1 < token.ranges.length && !member; i += 2) member = (token.ranges[i] ?? 0) <= code && code <= (token.ranges[i + 1] ?? -1);
  return member !== token.negated;
}

/**
 * Wildcard matching of `pattern` against `length` items: `isRun` tokens take any number of items,
 * the others one item each when `matchesAt` says so. Only the last run is ever backtracked into
 * (the parts between runs have fixed lengths, so their leftmost place is always the best), which
 * bounds the work by pattern length times `length`. Used for segments of a path and chars of one.
 * Each step spends one of `work`, when given: a false answer once it is spent.
 */
function matchSequence<T>(pattern: readonly T[], length: number, isRun: (token: T) => boolean, matchesAt: (token: T, at: number) => boolean, work?: MatchWork): boolean {
  let p = 0;
  let t = 0;
  let runP = -1;
  let runT = 0;
  while (t < length) {
    if (work !== undefined && --work.left < 0) return false;
    const token = pattern[p];
    if (token !== undefined && isRun(token)) {
      runP = p++;
      runT = t;
    } else if (token !== undefined && matchesAt(token, t)) {
      p++;
      t++;
    } else if (runP !== -1) {
      p = runP + 1;
      t = ++runT;
    } else return false;
  }
  while (p < pattern.length && isRun(pattern[p] as T)) p++;
  return p === pattern.length;
}

// ---------------------------------------------------------------------------------------------
// Showing values safely

/** Characters a terminal acts on or a reader cannot see: controls, format and bidi characters, line separators, lone surrogates. */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]/gu;

function escapeUnsafe(text: string): string {
  return text.replace(UNSAFE, (char) => `\\u{${(char.codePointAt(0) ?? 0).toString(16)}}`);
}

/** A frontmatter value for a log line: JSON-like, at most MAX_SHOWN_CHARS, nothing unsafe in it. */
function show(value: unknown): string {
  return escapeUnsafe(cut(render(value, MAX_SHOWN_CHARS), MAX_SHOWN_CHARS));
}

/**
 * JSON-like text of `value` that stops once longer than `room`: a YAML alias can make a small file
 * a cyclic value or an exponentially large one, and JSON.stringify would throw or run forever.
 */
function render(value: unknown, room: number): string {
  if (typeof value === "string") return JSON.stringify(value.slice(0, room + 1));
  if (typeof value !== "object" || value === null) return String(value);
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? "Invalid Date" : value.toISOString();
  if (ArrayBuffer.isView(value)) return `<${value.byteLength} bytes>`;
  const list = Array.isArray(value);
  let text = list ? "[" : "{";
  for (const key of list ? value.keys() : Object.keys(value)) {
    if (text.length > room) break;
    const item = (value as Record<PropertyKey, unknown>)[key];
    text += `${text.length > 1 ? ", " : ""}${list ? "" : `${JSON.stringify(String(key).slice(0, room + 1))}: `}`;
    text += render(item, Math.max(0, room - text.length));
  }
  return text + (list ? "]" : "}");
}

/** `text` cut to at most `max` characters, ending in `…` when cut, never between a surrogate pair. */
function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  const end = max - 1;
  const code = text.charCodeAt(end - 1);
  return `${text.slice(0, isHighSurrogate(code) ? end - 1 : end)}…`;
}
