/**
 * What file text must never be able to say inside the block: the block's own tags, the tags hosts
 * frame instructions with, and OpenCode's `Instructions from:` marker. Everything here is a single
 * left-to-right pass (no backtracking regex), so hostile inputs (a `<` followed by 24k invisible
 * characters, 96 KB whitespace runs, thousands of `<`) cost linear time.
 */

/**
 * Characters a reader does not see but a model and a tokenizer keep (zero-width spaces and joiners,
 * U+034F, variation selectors, soft hyphen, BOM, tag characters, ...) and bidi controls, which can
 * make text read in another order than it is written. Both could hide a tag from the scanner.
 */
const INVISIBLE = /[\p{Default_Ignorable_Code_Point}\p{Bidi_Control}]/gu;

/** `text` without invisible and bidi control characters. */
export function sanitize(text: string): string {
  return text.replace(INVISIBLE, "");
}

/**
 * Tag names a file must not be able to open or close, matched as prefixes (`system` covers
 * `system-reminder` and `systemd`: neutralizing a harmless look-alike costs nothing).
 */
const TAG_NAMES = ["project-context", "context-file", "system", "instructions"];
const MARKER_WORDS = ["instructions", "from"];

/**
 * Neutralizes, in SANITIZED text, every `<` that begins one of TAG_NAMES (any case, whitespace and
 * line breaks allowed after `<` and around an optional `/`), writing it `&lt;`; and the colon of a
 * line whose first non-blank text is `Instructions from:` (any case, any spacing), writing it `&#58;`.
 * Any prefix of the result has the same property, and so does the result followed by text that
 * starts with a line break: a match needs a name letter right after its gap, which such text lacks.
 */
export function escapeText(text: string): string {
  let out = "";
  let copied = 0; // text[0, copied) is already in `out`
  const lineAt = (at: number) => {
    const colon = markerColon(text, at);
    if (colon === -1) return;
    out += text.slice(copied, colon) + "&#58;";
    copied = colon + 1;
  };
  lineAt(0);
  // Only a `<` or a line's start can begin what is neutralized: the engine's own scan finds them
  // (a character class, linear), not a loop over every character (most of a cold step's escaping).
  LOOKED_AT.lastIndex = 0;
  for (let match = LOOKED_AT.exec(text); match !== null; match = LOOKED_AT.exec(text)) {
    const at = match.index;
    if (text.charCodeAt(at) !== 0x3c /* < */) lineAt(at + 1);
    else if (beginsTag(text, at + 1)) {
      out += text.slice(copied, at) + "&lt;";
      copied = at + 1;
    }
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/** A `<`, or a character isLineBreak is true of (escapeText is never reentered: one regex, its lastIndex reset at each call). */
const LOOKED_AT = /[<\n\v\f\r\x85\u2028\u2029]/g;

/**
 * Whether `text[from...]` is a gap, an optional `/`, a gap, then a tag name. Each whitespace run is
 * skipped here by at most the one `<` right before it (a `<` ends any run), so all calls together
 * stay linear.
 */
function beginsTag(text: string, from: number): boolean {
  let at = skipSpace(text, from, false);
  if (text.charCodeAt(at) === 0x2f /* / */) at = skipSpace(text, at + 1, false);
  return TAG_NAMES.some((name) => startsWithFolded(text, at, name));
}

/** Index of the colon when the line at `from` reads `Instructions from:` after blanks, else -1. */
function markerColon(text: string, from: number): number {
  let at = skipSpace(text, from, true);
  for (const word of MARKER_WORDS) {
    if (!startsWithFolded(text, at, word)) return -1;
    at = skipSpace(text, at + word.length, true);
  }
  return text.charCodeAt(at) === 0x3a /* : */ ? at : -1;
}

function skipSpace(text: string, at: number, sameLine: boolean): number {
  while (at < text.length) {
    const code = text.charCodeAt(at);
    if (!isSpace(code) || (sameLine && isLineBreak(code))) break;
    at++;
  }
  return at;
}

/** `text` at `at` spells lowercase ASCII `word` in any case (with the two non-ASCII letters Unicode folds to ASCII). */
function startsWithFolded(text: string, at: number, word: string): boolean {
  if (at + word.length > text.length) return false;
  for (let i = 0; i < word.length; i++) {
    if (foldToAscii(text.charCodeAt(at + i)) !== word.charCodeAt(i)) return false;
  }
  return true;
}

function foldToAscii(code: number): number {
  if (code >= 0x41 && code <= 0x5a) return code + 0x20;
  if (code === 0x17f) return 0x73; // ſ (long s) folds to s
  if (code === 0x212a) return 0x6b; // K (Kelvin sign) folds to k
  return code;
}

/** JavaScript's `\s` plus NEL: anything a reader could take for a gap. */
function isSpace(code: number): boolean {
  if (code <= 0x20) return code === 0x20 || (code >= 0x09 && code <= 0x0d);
  return (
    code === 0x85 || code === 0xa0 || code === 0x1680 || (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 || code === 0x2029 || code === 0x202f || code === 0x205f || code === 0x3000 || code === 0xfeff
  );
}

/** Anything a reader could take for the start of a new line. */
function isLineBreak(code: number): boolean {
  return (code >= 0x0a && code <= 0x0d) || code === 0x85 || code === 0x2028 || code === 0x2029;
}

const ATTRIBUTE_ESCAPES: Readonly<Record<string, string>> = { "&": "&amp;", '"': "&quot;", "<": "&lt;", ">": "&gt;" };

/** A path made safe inside a double-quoted attribute, on one line. */
export function escapeAttribute(path: string): string {
  return sanitize(path).replace(/[&"<>]|[\n\v\f\r\x85\u2028\u2029]/g, (char) => ATTRIBUTE_ESCAPES[char] ?? " ");
}

/** A path made safe inside a one-line note: no line breaks, no tags. */
export function escapeInline(text: string): string {
  return escapeText(sanitize(text).replace(/[\n\v\f\r\x85\u2028\u2029]/g, " "));
}

/** A file's text as the model gets it: invisibles removed, tags and markers neutralized, no trailing whitespace. */
export function modelText(body: string): string {
  return escapeText(sanitize(body)).trimEnd();
}
