import { requireFrom } from "../libraries.ts";

/** The keys that make a leading `---` block frontmatter: this plugin's own, and those of peers' rule files. */
export const KNOWN_KEYS: ReadonlySet<string> = new Set([
  "root",
  "include",
  "description",
  "paths",
  "agents",
  "exclude_agents",
  "apply_to",
  "priority",
  "merge",
  "watch",
  "globs",
  "alwaysApply",
  "applyTo",
]);

export interface ParsedText {
  /** The text the model sees: without the frontmatter block, or the whole text when it has none. */
  readonly body: string;
  /** The block's mapping; `{}` when there is no frontmatter (or it could not be parsed). */
  readonly frontmatter: Readonly<Record<string, unknown>>;
  /** Why a block meant as frontmatter was dropped without its fields being used. */
  readonly error?: string;
}

/**
 * A closed block at the very start: `---[lang]`, then lines, then `---`, each delimiter alone on its
 * line. Only such a block is looked at: a file that merely opens with a `---` rule and never closes
 * it is all content (gray-matter alone would take the whole file as frontmatter).
 */
// The language tag is one optional group: two runs of blanks with nothing required between them made
// the engine try every split of a long run of spaces after `---` (120,000 spaces: 16 s per match).
const BLOCK = /^---[ \t]*(?:([A-Za-z]+)[ \t]*)?\r?\n(?:([\s\S]*?)\r?\n)?---[ \t]*(?:\r?\n|$)/;
/** A first line that opens a block as BLOCK reads one. */
const OPENER = /^---[ \t]*(?:[A-Za-z]+[ \t]*)?\r?\n/;

/** A line that starts with a known key and a colon (optionally quoted, as JSON writes it). */
const KNOWN_KEY_LINE = new RegExp(`^[ \\t]*["']?(?:${[...KNOWN_KEYS].join("|")})["']?[ \\t]*:`, "m");
/** An opener whose first line after it (blank lines aside) is a mapping key, as frontmatter starts. */
const OPENS_WITH_KEY = /^---[^\n]*\n\s*["']?[\w.-]+["']?[ \t]*:(?:[ \t]|\r?\n|$)/;

/**
 * Text cut short (a file longer than maxFileBytes) that opens a block and does not close it, and
 * reads as frontmatter (a key first, or a known key in it): where its frontmatter ends, and what it
 * says (its include mode), lie past the cut. A file that opens with a `---` rule and goes on with
 * content (a heading, prose) is content.
 */
export function cutInsideFrontmatter(text: string): boolean {
  return OPENER.test(text) && !BLOCK.test(text) && (OPENS_WITH_KEY.test(text) || KNOWN_KEY_LINE.test(text));
}

const NONE: Readonly<Record<string, unknown>> = Object.freeze({});

const refuse = (language: string) => (): never => {
  throw new Error(`frontmatter language "${language}" is refused: it would run code`);
};

/**
 * gray-matter's `javascript` engine `eval`s the block (`---js`), and `coffee`/`cson` name engines that
 * would run code too. Context files are untrusted repository content: every code language (and each
 * alias gray-matter maps to one) throws before anything is evaluated. YAML stays js-yaml's safeLoad.
 */
const SAFE_OPTIONS = Object.freeze({
  engines: Object.freeze({
    javascript: refuse("javascript"),
    js: refuse("js"),
    coffee: refuse("coffee"),
    coffeescript: refuse("coffeescript"),
    cson: refuse("cson"),
  }),
});

/** gray-matter's lib/parse: the block's text through the engine its language names, as gray-matter itself calls it. */
type ParseBlock = (language: string, text: string, options: object) => unknown;

let matter: ParseBlock | undefined;
/**
 * gray-matter (with js-yaml and esprima, 20-35 ms to load): loaded on the first block simpleYaml does
 * not read, or before it in tasks of its own (WARM_FRONTMATTER) by the worktree's catalog, which
 * meets every context file's frontmatter first (needsMatter). Its engine lookup and call (lib/parse)
 * are used rather than `matter()`, whose comment strip before the parse is quadratic (matterData).
 */
const loadMatter = (): ParseBlock => (matter ??= (requireFrom()("gray-matter"), requireFrom("gray-matter")("./lib/parse") as ParseBlock));

/**
 * What `matter(\`---${language}\n${inner}\n---\n\`, options).data` is, without its quadratic step:
 * gray-matter takes a block that is only comments and blanks (`/^\s*#[^\n]+/gm` removed, then
 * trimmed) as `{}`, and passes any other to its engine. That regular expression runs `\s*` from each
 * line start to the end of a run of blank lines: 64,000 of them took 1.3 s, a 128 KiB file 5 s.
 */
function matterData(language: string, inner: string): unknown {
  // The block as gray-matter gives it to the engine: from the opener's line break to the closing one.
  const block = `\n${inner}`;
  if (onlyComments(block)) return {};
  return loadMatter()(language === "" ? "yaml" : language, block, { engines: { ...SAFE_OPTIONS.engines } });
}

/** A character JavaScript's `\s` matches, and one after which the `m` flag's `^` matches. */
const WHITE = /\s/;
const isLineTerminator = (char: string) => char === "\n" || char === "\r" || char === "\u2028" || char === "\u2029";

/**
 * Whether `text.replace(/^\s*#[^\n]+/gm, "").trim()` is empty (gray-matter's test), in linear time:
 * the same matches, found left to right, with each blank run's end known from one pass backwards.
 */
export function onlyComments(text: string): boolean {
  const length = text.length;
  // blankEnd[i]: the first index at or after i that is not blank.
  const blankEnd = new Uint32Array(length + 1);
  blankEnd[length] = length;
  for (let i = length - 1; i >= 0; i--) blankEnd[i] = WHITE.test(text[i]!) ? blankEnd[i + 1]! : i;
  let at = 0;
  while (at < length) {
    if (at === 0 || isLineTerminator(text[at - 1]!)) {
      const hash = blankEnd[at]!;
      if (text[hash] === "#" && hash + 1 < length && text[hash + 1] !== "\n") {
        const lineEnd = text.indexOf("\n", hash + 1);
        at = lineEnd === -1 ? length : lineEnd;
        continue;
      }
    }
    if (!WHITE.test(text[at]!)) return false;
    at++;
  }
  return true;
}

/**
 * Loads gray-matter now, so that the first file with frontmatter does not pay for it inside a step:
 * as three loads, each meant for an event-loop task of its own (~20 ms in one would be a stall).
 * js-yaml 3 requires esprima when it is installed (for a type the safe engine never uses), ~5 ms,
 * then itself ~8 ms, then gray-matter ~4 ms; each later load finds the earlier ones cached.
 */
export const WARM_FRONTMATTER: readonly (() => void)[] = Object.freeze([
  // Each resolved from the module that requires it, as npm may nest it there.
  () => {
    try {
      requireFrom("gray-matter", "js-yaml")("esprima");
    } catch {
      // not installed: js-yaml does without it
    }
  },
  () => requireFrom("gray-matter")("js-yaml"),
  () => loadMatter(),
]);

// ---------------------------------------------------------------------------------------------
// The plain mappings most frontmatter is, read without gray-matter.
//
// gray-matter and js-yaml (with esprima, which js-yaml loads for a type the safe schema never uses)
// take 20-35 ms to load, the largest part of a first step. A block of `key: value` lines whose values
// are all of a few unambiguous shapes is read here instead, to the very value js-yaml's safeLoad
// gives (a property test holds the two equal): printable ASCII only, no indentation, comments, tabs,
// anchors, tags or multi-line scalars, no duplicate key. Anything else goes to gray-matter.
//   plain scalar  starts with a letter, then letters, digits, spaces and `_ . / ( ) , ; + = @ * ' " -`
//                 (no `:` or `#`, which could end it): a string, but for null/Null/NULL, true/True/TRUE
//                 and false/False/FALSE (js-yaml's YAML 1.2 core, where yes/no/on/off are strings)
//   integer       0, or 1-15 digits not starting with 0 (no octal, sexagesimal or float to tell apart)
//   quoted        "..." without `"` or `\`, '...' without `'`: the text between
//   flow list     [] or [item, item] of quoted strings
//   nothing       `key:` alone: null
// ---------------------------------------------------------------------------------------------

// Each shape is matched in linear time: a lazy group before trailing spaces (`(.*?)[ ]*$`) would go
// back over a long run of spaces once per character of it (a 32 KB run blocked for 0.8 s).
const KEY = /^[A-Za-z][A-Za-z0-9_-]*:/;
const PLAIN = /^[A-Za-z][A-Za-z0-9 _./(),;+=@*'"-]*$/;
const INTEGER = /^(?:0|[1-9][0-9]{0,14})$/;
const QUOTED = /^(?:"([ !#-[\]-~]*)"|'([ -&(-~]*)')$/;
const KEYWORDS: Readonly<Record<string, null | boolean>> = Object.freeze({ null: null, Null: null, NULL: null, true: true, True: true, TRUE: true, false: false, False: false, FALSE: false });

/** The block's mapping when it is one of the plain shapes above, else undefined (gray-matter decides). */
export function simpleYaml(inner: string): Record<string, unknown> | undefined {
  if (!/^[ -~\n]*$/.test(inner)) return undefined;
  const mapping: Record<string, unknown> = {};
  for (const line of inner.split("\n")) {
    if (line.trim() === "") continue;
    const match = KEY.exec(line);
    if (match === null) return undefined;
    const key = match[0].slice(0, -1);
    const rest = line.slice(match[0].length);
    // `key:value` is one plain scalar, not a pair. Only spaces can be around the value (printable ASCII, lines split).
    if (rest !== "" && !rest.startsWith(" ")) return undefined;
    const text = rest.trim();
    // __proto__ and friends: js-yaml defines such keys as own properties, an assignment would not.
    if (key.startsWith("__") || Object.hasOwn(mapping, key)) return undefined;
    const value = text === "" ? null : simpleValue(text);
    if (value === undefined) return undefined;
    mapping[key] = value;
  }
  return mapping;
}

function simpleValue(text: string): unknown {
  if (Object.hasOwn(KEYWORDS, text)) return KEYWORDS[text];
  if (INTEGER.test(text)) return Number(text);
  if (PLAIN.test(text)) return text;
  const quoted = QUOTED.exec(text);
  if (quoted !== null) return quoted[1] ?? quoted[2];
  if (!text.startsWith("[") || !text.endsWith("]")) return undefined;
  const list = text.slice(1, -1).trim();
  if (list === "") return [];
  const items: string[] = [];
  for (const item of list.split(",")) {
    const element = QUOTED.exec(item.trim());
    if (element === null) return undefined;
    items.push((element[1] ?? element[2])!);
  }
  return items;
}

/**
 * Splits a context file into body and frontmatter. The rule:
 * - a closed leading block that parses (YAML, or JSON with `---json`) as a mapping with at least one
 *   known key is frontmatter: removed from the body, its mapping returned;
 * - a block that parses to anything else (prose such as `Important: keep this`, a list, a string, a
 *   mapping of unknown keys) is content and stays in the body, untouched;
 * - a block that does NOT parse but is evidently meant as frontmatter — a line starting with a known
 *   key and a colon, or a language tag (`---js`, refused unexecuted) — is removed from the body and
 *   reported through `error`: its fields are not used, and broken metadata is not worth the model's
 *   tokens. One that does not parse and shows no such sign is prose, and stays.
 */
export function parseFrontmatter(text: string): ParsedText {
  const block = blockOf(text);
  if (block === undefined) return { body: text, frontmatter: NONE };
  const { language, inner } = block;
  const body = text.slice(block.length);
  let data: unknown;
  try {
    const read = readWithoutMatter(block);
    if (read instanceof Error) throw read;
    // gray-matter's engine sees exactly the block, so it and BLOCK agree on where it ends.
    data = read === MATTER ? matterData(language, inner) : read;
  } catch (error) {
    if (language === "" && !KNOWN_KEY_LINE.test(inner)) return { body: text, frontmatter: NONE };
    const reason = (error instanceof Error ? (error.message.split("\n")[0] ?? "") : String(error)).replace(/:$/, "");
    return { body, frontmatter: NONE, error: reason };
  }
  if (!isMapping(data) || !Object.keys(data).some((key) => KNOWN_KEYS.has(key))) return { body: text, frontmatter: NONE };
  return { body, frontmatter: Object.freeze({ ...data }) };
}

/**
 * YAML aliases a block may use: each repeats its anchor's value, and js-yaml turns a mapping key that
 * is a list of aliases into one string (20,000 aliases of a 60 KB anchor in a 120 KB file: a 1.2 GB
 * key, 2.4 GB of RSS, a second of blocked loop). Frontmatter has little use for any.
 */
const MAX_ALIASES = 64;
/** An alias as YAML starts one (after a blank, a flow indicator, a key's colon or a line start): `*` and a name; one in a comment or a quoted string counts too. */
const ALIAS = /(?:^|[\s,[{:])\*[^\s,[\]{}]/g;

function usesManyAliases(inner: string): boolean {
  ALIAS.lastIndex = 0;
  for (let count = 0; ALIAS.exec(inner) !== null; ) if (++count > MAX_ALIASES) return true;
  return false;
}

/** The closed leading block parseFrontmatter looks at: its language tag, its lines, and its length with the delimiters. */
function blockOf(text: string): { language: string; inner: string; length: number } | undefined {
  const block = BLOCK.exec(text);
  if (block === null) return undefined;
  const inner = block[2] ?? "";
  // A line inside starting with `---` would end the block early for gray-matter (and starts a second
  // YAML document): not a single mapping, so content.
  if (inner.startsWith("---") || inner.includes("\n---")) return undefined;
  return { language: block[1] ?? "", inner, length: block[0].length };
}

/**
 * Whether parsing a file that starts with `text` (all of it, or a head cut short: `truncated`) would
 * load gray-matter now: it is not loaded yet, and the file opens with a block simpleYaml does not read
 * (a language tag, another shape of YAML), or with a block the head does not show closed.
 */
export function needsMatter(text: string, truncated: boolean): boolean {
  if (matter !== undefined) return false;
  const block = blockOf(text);
  if (block === undefined) return truncated && OPENER.test(text) && !BLOCK.test(text);
  return readWithoutMatter(block) === MATTER;
}

const MATTER = Symbol("gray-matter");

/**
 * What a block is, read without gray-matter: its mapping (simpleYaml's plain shapes), a refusal (too
 * many aliases), or MATTER when gray-matter must read it. parseFrontmatter and needsMatter both ask here.
 */
function readWithoutMatter({ language, inner }: { language: string; inner: string }): Record<string, unknown> | Error | typeof MATTER {
  const plain = language === "" ? simpleYaml(inner) : undefined;
  if (plain !== undefined) return plain;
  if (language !== "json" && usesManyAliases(inner)) return new Error(`uses more than ${MAX_ALIASES} YAML aliases`);
  return MATTER;
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date);
}
