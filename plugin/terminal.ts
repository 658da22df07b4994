/**
 * Text on its way to a terminal (the command-line tool's output, OpenCode's log): what a repository
 * names or holds is printed so that it cannot drive the terminal (ESC starts a command: cursor moves,
 * erasing lines, OSC 52 clipboard writes, OSC 8 links) nor read as other text (bidi overrides,
 * invisible characters). Plain Node; no host.
 */

/**
 * Characters a terminal acts on or a reader cannot see: controls (ESC starts a terminal command, CR
 * rewrites the line, C1's CSI is one byte of ESC [), format characters (bidi overrides show text in
 * another order), line separators, lone surrogates, default-ignorable code points; and the
 * backslash, escaped too so that an escaped text reads back as exactly one original.
 */
const UNSAFE = /[\\\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]/gu;
/** UNSAFE but for the backslash, a tab and a line break (LF, or CR LF): what a multi-line text may keep. */
const UNSAFE_IN_TEXT = /(?!\t|\n|\r\n)[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]/gu;
const NAMED_ESCAPES: Readonly<Record<string, string>> = { "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" };

const escapeChar = (char: string): string => {
  const code = char.codePointAt(0) ?? 0;
  return NAMED_ESCAPES[char] ?? (code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u{${code.toString(16)}}`);
};

/** `value` safe to print to a terminal, on one line: every character of UNSAFE written as an escape (`\x1b`, `\u{202e}`, `\n`, `\\`). */
export function terminalSafe(value: string): string {
  return value.replace(UNSAFE, escapeChar);
}

/**
 * A multi-line text (a block as the model gets it) safe to print to a terminal: its lines and tabs
 * kept, every other character of UNSAFE written as terminalSafe writes it. Backslashes are kept as
 * written, so the text reads as the model reads it; a literal `\x1b` in it reads like an escaped ESC.
 */
export function terminalText(value: string): string {
  return value.replace(UNSAFE_IN_TEXT, escapeChar);
}

/** What JSON.stringify leaves raw that a terminal acts on or hides (it escapes C0 controls and lone surrogates itself). */
const JSON_UNSAFE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]/gu;

/** `value` as one line of JSON that is safe to print to a terminal: what JSON leaves raw and a terminal would act on is `\uXXXX`. */
export function terminalJson(value: unknown): string {
  return (JSON.stringify(value) ?? "null").replace(JSON_UNSAFE, (char) =>
    Array.from({ length: char.length }, (_, i) => `\\u${char.charCodeAt(i).toString(16).padStart(4, "0")}`).join(""),
  );
}
