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
 * Both are read as a reader or an NFKC tokenizer would: format characters sanitize keeps (U+0600,
 * U+FFFB, ...) count as gaps and may sit between letters, and compatibility forms (`＜`, `﹤`,
 * `／`, `ｓ`, `𝐬`, `ﬁ`) count as what NFKC makes of them; a look-alike `<` or colon is replaced by
 * the same escape. Any prefix of the result has the same property, and so does the result followed
 * by text that starts with a line break: a match needs a name letter right after its gap, which such
 * text lacks.
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
    if (isLineBreak(text.charCodeAt(at))) lineAt(at + 1);
    else if (beginsTag(text, at + 1)) {
      out += text.slice(copied, at) + "&lt;";
      copied = at + 1;
    }
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/**
 * A `<` or one of the two characters NFKC makes `<` (fullwidth, small form), or a character
 * isLineBreak is true of (escapeText is never reentered: one regex, its lastIndex reset at each call).
 */
const LOOKED_AT = /[<\uff1c\ufe64\n\v\f\r\x85\u2028\u2029]/g;

/**
 * Whether `text[from...]` is a gap, an optional `/`, a gap, then a tag name. Each gap (whitespace and
 * format characters) is skipped here by at most the one `<` right before it (a `<` or a look-alike
 * ends any gap), and format characters inside a name by at most each name once, so all calls
 * together stay linear.
 */
function beginsTag(text: string, from: number): boolean {
  let at = skipSpace(text, from, false);
  const slashEnd = endOfFolded(text, at, "/");
  if (slashEnd !== -1) at = skipSpace(text, slashEnd, false);
  return TAG_NAMES.some((name) => endOfFolded(text, at, name) !== -1);
}

/** Index of the colon when the line at `from` reads `Instructions from:` after blanks, else -1. */
function markerColon(text: string, from: number): number {
  let at = skipSpace(text, from, true);
  for (const word of MARKER_WORDS) {
    const end = endOfFolded(text, at, word);
    if (end === -1) return -1;
    at = skipSpace(text, end, true);
  }
  // Replaced by `&#58;`, so it must be one character that is a colon (`：` and `﹕` are), not `⩴` (`::=`).
  const code = text.charCodeAt(at);
  return code === 0x3a /* : */ || (code >= 0x80 && compatibilityFold(code) === ":") ? at : -1;
}

function skipSpace(text: string, at: number, sameLine: boolean): number {
  while (at < text.length) {
    const code = text.codePointAt(at)!;
    if (isSpace(code)) {
      if (sameLine && isLineBreak(code)) break;
      at++;
    } else if (isFormat(text, at)) at += code > 0xffff ? 2 : 1;
    else break;
  }
  return at;
}

/**
 * The index right after lowercase ASCII `word` spelled in `text` from `at` in any case, else -1:
 * non-ASCII characters as compatibilityFold reads them (a ligature may spell several letters),
 * format characters skipped between letters.
 */
function endOfFolded(text: string, at: number, word: string): number {
  let spelled = 0;
  while (spelled < word.length) {
    if (at >= text.length) return -1;
    const code = text.codePointAt(at)!;
    const size = code > 0xffff ? 2 : 1;
    if (spelled > 0 && isFormat(text, at)) {
      at += size;
      continue;
    }
    if (code < 0x80) {
      // ASCII, nearly all a file holds, needs no normalization.
      if ((code >= 0x41 && code <= 0x5a ? code + 0x20 : code) !== word.charCodeAt(spelled)) return -1;
      spelled++;
    } else {
      const folded = compatibilityFold(code);
      if (!word.startsWith(folded, spelled)) return -1;
      spelled += folded.length;
    }
    at += size;
  }
  return at;
}

/**
 * A non-ASCII character as a tokenizer that normalizes NFKC and a model that ignores case read it:
 * `Ｓ`, `𝐒`, `ſ` and K (Kelvin) are `s`, `s`, `s` and `k`, `ﬁ` is `fi`, `：` is `:`.
 */
function compatibilityFold(code: number): string {
  let folded = folds.get(code);
  if (folded === undefined) {
    if (folds.size === MAX_FOLDS) folds.clear();
    folds.set(code, (folded = String.fromCodePoint(code).normalize("NFKC").toLowerCase()));
  }
  return folded;
}

/**
 * compatibilityFold's answers: one costs ~0.25 µs, each name tried after a `<` asks again, and a
 * file uses few distinct characters. Emptied when full, so no text can make it grow past MAX_FOLDS.
 */
const folds = new Map<number, string>();
const MAX_FOLDS = 4096;

/**
 * A format character (Cf) at `at`: sanitize removes most, not the visible ones (Arabic number signs
 * U+0600-0605, U+06DD, interlinear annotation U+FFF9-FFFB, Egyptian hieroglyph controls, ...), and
 * a model reads past them as past a gap.
 */
function isFormat(text: string, at: number): boolean {
  if (text.charCodeAt(at) < 0xad) return false; // U+00AD is the first
  FORMAT.lastIndex = at;
  return FORMAT.test(text);
}

const FORMAT = /\p{Cf}/uy;

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

/**
 * A worktree path as the block and the tool show it, in an attribute or a note: one line, no tag,
 * and never another file's path. Each character that could end the attribute or open a tag (with
 * the fullwidth and small forms NFKC makes them), each control character but the tab, line break,
 * invisible and bidi control character is written as a character reference. Removing or blanking
 * them (sanitize, U+FFFD) showed `pkg\u200b/AGENTS.md` as `pkg/AGENTS.md`, and its deletion's notice
 * told the model to disregard the other file. `&` is written `&amp;`, so no name can spell another's
 * reference: two paths are shown alike only when they are the same.
 */
export function escapePath(path: string): string {
  // A name not in NFC reads as its NFC twin (`cafe\u0301` as `café`, to a reader and to a tokenizer
  // that normalizes): such a path is shown with every non-ASCII character as a reference.
  const escaped = path === path.normalize("NFC") ? PATH_ESCAPED : PATH_ESCAPED_NOT_NFC;
  return path.replace(escaped, (char) => NAMED_ESCAPES[char] ?? `&#x${char.codePointAt(0)!.toString(16).toUpperCase()};`);
}

const PATH_ESCAPED = /[&"<>\uff06\ufe60\uff02\uff1c\ufe64\uff1e\ufe65\u2028\u2029\p{Default_Ignorable_Code_Point}\p{Bidi_Control}]|(?!\t)\p{Cc}/gu;
const PATH_ESCAPED_NOT_NFC = /[&"<>]|[^\t\x20-\x7e]/gu;
const NAMED_ESCAPES: Readonly<Record<string, string>> = { "&": "&amp;", '"': "&quot;", "<": "&lt;", ">": "&gt;" };

/**
 * A path made safe inside a one-line note: no line breaks, no tags, and no other control character
 * (ESC, BEL, BS, C1's CSI...): written U+FFFD, as the TUI module shows them. The tool's text is shown
 * by OpenCode's TUI, which writes a text's control characters to the terminal as they are.
 */
export function escapeInline(text: string): string {
  return escapeText(sanitize(text).replace(INLINE_UNSAFE, inlineSafe));
}

/** Line breaks (a space in a note or an attribute) and every other control character but the tab (U+FFFD). */
const INLINE_UNSAFE = /[\u2028\u2029]|(?!\t)\p{Cc}/gu;
const inlineSafe = (char: string): string => (isLineBreak(char.charCodeAt(0)) ? " " : "\uFFFD");

/** A file's text as the model gets it: invisibles removed, tags and markers neutralized, no trailing whitespace. */
export function modelText(body: string): string {
  return escapeText(sanitize(body)).trimEnd();
}
