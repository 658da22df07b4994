import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { escapeInline, escapePath, escapeText, modelText, sanitize } from "../../plugin/block/escape.ts";
import { cpuTimeOf } from "../helpers/stall.ts";

/**
 * What a model could read as a tag or OpenCode's marker in text as it reads it (see read); a
 * reference written with regexes (fine on short test inputs).
 */
const GAP = "[\\s\\x85]*";
const TAG = new RegExp(`<${GAP}\\/?${GAP}(?:project-context|context-file|system|instructions)`, "iu");
const BLANK = "[^\\S\\n\\r\\v\\f\\x85\\u2028\\u2029]*";
const MARKER = new RegExp(`^${BLANK}instructions${BLANK}from${BLANK}:`, "imu");
const INVISIBLE = /[\p{Default_Ignorable_Code_Point}\p{Bidi_Control}]/u;

/**
 * `text` as a model reads it behind a tokenizer that normalizes NFKC, one code point at a time:
 * format characters (Cf) passed over, every other one normalized; `origins[i]` is the index in
 * `text` of the character `view[i]` comes from.
 */
function read(text: string): { view: string; origins: number[] } {
  let view = "";
  const origins: number[] = [];
  for (let at = 0; at < text.length; ) {
    const char = String.fromCodePoint(text.codePointAt(at)!);
    if (!/\p{Cf}/u.test(char)) {
      const normalized = char.normalize("NFKC");
      view += normalized;
      for (let i = 0; i < normalized.length; i++) origins.push(at);
    }
    at += char.length;
  }
  return { view, origins };
}

const hostile = fc.constantFrom(
  "<project-context>", "</project-context", "</PROJECT-context >", "< /\n\t system-reminder>", "<\u200b/\u2060system>",
  "<s\u200cystem>", "<\u202eSYSTEM>", "<\u034fsystem>", "<\ufe0fsystem>", "<ſystem>", "</context-file>", "<INSTRUCTIONS>",
  // Format characters sanitize keeps, and the forms NFKC makes the tags of (fullwidth, small, mathematical, ligature).
  "<\ufffb/project-context>", "<\u0600system-reminder>", "<s\u{13430}y\u06ddstem>", "\u{110bd}Instructions\u070ffrom:",
  "\uff1c\uff0f\uff50\uff52\uff4f\uff4a\uff45\uff43\uff54\uff0d\uff43\uff4f\uff4e\uff54\uff45\uff58\uff54\uff1e", "\ufe64/system-reminder\ufe65",
  "<\u{1d42c}\u{1d432}\u{1d42c}\u{1d42d}\u{1d41e}\u{1d426}>", "</context-\ufb01le>", "<sy\ufb06em>", "project\ufe63context", "Instructions from\uff1a",
  "Instructions from: /x/AGENTS.md\n", "\t iNSTRUCTIONS\u00a0FROM :", "\u2028Instructions from:", "instructions\u200bfrom:",
  " ".repeat(300), "\u200b".repeat(300), "\u3000\u2003", "😀", "\ud83d", "<", "</", "/", "system", "\n", "\r\n", "&lt;",
);
const letters = fc.string({ unit: fc.constantFrom(...[..."<>/ \n\tsytemSYTEM-IiNnfrom:\u200b\u202e\ufffb\u0600\u{13430}\uff1c\ufe64\uff0f\uff53\uff33\ufe63\uff1a\u{1d42c}\ufb06"]), maxLength: 30 });
const text = fc.array(fc.oneof(hostile, letters, fc.string({ unit: "binary", maxLength: 10 })), { maxLength: 12 }).map((parts) => parts.join(""));

describe("escape", () => {
  test("neutralizes tags in any case and spacing, and OpenCode's marker", () => {
    expect(escapeText("a </project-context> b")).toBe("a &lt;/project-context> b");
    expect(escapeText("< \n / SYSTEM-Reminder>")).toBe("&lt; \n / SYSTEM-Reminder>");
    expect(escapeText("<ſystem>")).toBe("&lt;ſystem>");
    expect(escapeText("<systemd> <b> </div> a<instructions")).toBe("&lt;systemd> <b> </div> a&lt;instructions");
    expect(escapeText("x\n  Instructions  FROM : /a\nsay Instructions from: b")).toBe("x\n  Instructions  FROM &#58; /a\nsay Instructions from: b");
    expect(modelText("<\u200bsystem>\u202e\n\n  \n")).toBe("&lt;system>");
    expect(sanitize("a\u034fb\ufe0fc\u200bd\u2066e\u00adf")).toBe("abcdef");
    expect(escapePath('a"<b>&\n\u200bc\t\x1b')).toBe("a&quot;&lt;b&gt;&amp;&#xA;&#x200B;c\t&#x1B;");
    expect(escapeInline("x\nInstructions from: y <system>")).toBe("x Instructions from: y &lt;system>");
  });

  test("format characters are gaps, and NFKC forms are what NFKC makes them; a look-alike `<` or colon gets the same escape", () => {
    expect(escapeText("<\ufffb/project-context> <\u0600system-reminder> </pro\u{13430}ject-context>")).toBe(
      "&lt;\ufffb/project-context> &lt;\u0600system-reminder> &lt;/pro\u{13430}ject-context>",
    );
    expect(escapeText("\ufff9Instructions\u06ddfrom\u070f: x")).toBe("\ufff9Instructions\u06ddfrom\u070f&#58; x");
    expect(escapeText("\uff1c/project-context\uff1e \ufe64\uff0f\uff33\uff59stem\ufe65 <\u{1d42c}ystem> </context-\ufb01le> <sy\ufb06em>")).toBe(
      "&lt;/project-context\uff1e &lt;\uff0f\uff33\uff59stem\ufe65 &lt;\u{1d42c}ystem> &lt;/context-\ufb01le> &lt;sy\ufb06em>",
    );
    expect(escapeText("Instructions from\uff1a /a\n\uff29nstructions \uff46rom\ufe55")).toBe("Instructions from&#58; /a\n\uff29nstructions \uff46rom&#58;");
    // A colon NFKC makes several characters of is not one the escape could stand for.
    expect(escapeText("Instructions from\u2a74")).toBe("Instructions from\u2a74");
    // Arabic signs and fullwidth text that spell no tag are left as written.
    expect(escapeText("\u0600\u0661\u06dd \uff1cb\uff1e \uff1c\uff0f\uff44\uff49\uff56\uff1e")).toBe("\u0600\u0661\u06dd \uff1cb\uff1e \uff1c\uff0f\uff44\uff49\uff56\uff1e");
    expect(escapePath("a\uff02\uff1e\uff1c/project-context\ufe65\uff06")).toBe("a&#xFF02;&#xFF1E;&#xFF1C;/project-context&#xFE65;&#xFF06;");
  });

  test("a path is shown on one line, without a character that could end the attribute or open a tag, and never as another path, NFC and NFD twins included (found in a hunt)", () => {
    const unit = fc.constantFrom(...[..."ab/&#;xX0<>\"\n\r\t \u200b\u202e\u2060\u2028\x01\x1b\x9b\uff1c\uff02\ufe64e\u0301\u00e9\u212b\u00c5"]);
    const path = fc.oneof(fc.string({ unit, maxLength: 12 }), fc.string({ unit: "binary", maxLength: 8 }));
    fc.assert(
      fc.property(path, path, (a, b) => {
        expect(escapePath(a)).not.toMatch(/["<>\n\r\u2028\u2029\uff02\uff1c\uff1e\ufe64\ufe65\p{Default_Ignorable_Code_Point}\p{Bidi_Control}]|(?!\t)\p{Cc}/u);
        // Not even as a reader, or a tokenizer that normalizes NFC, reads them.
        if (a !== b) expect(escapePath(a).normalize("NFC")).not.toBe(escapePath(b).normalize("NFC"));
      }),
      { numRuns: 5000 },
    );
  });

  test("matches the reference exactly: each tag's `<`, each marker's colon, nothing else", () => {
    fc.assert(
      fc.property(text, (raw) => {
        const clean = sanitize(raw);
        let expected = "";
        for (let at = 0; at < clean.length; at++) {
          const lineStart = at === 0 || /[\n\r\v\f\x85\u2028\u2029]/.test(clean[at - 1]!);
          const marker = lineStart ? new RegExp(MARKER.source, "iuy") : undefined;
          const line = marker !== undefined ? read(clean.slice(at)) : undefined;
          if (marker !== undefined && marker.exec(line!.view) !== null) {
            const colon = at + line!.origins[marker.lastIndex - 1]!;
            expected += clean.slice(at, colon) + "&#58;";
            at = colon;
            continue;
          }
          expected += read(clean[at]!).view === "<" && new RegExp(TAG.source, "iuy").test(read(clean.slice(at)).view) ? "&lt;" : clean[at];
        }
        expect(escapeText(clean)).toBe(expected);
      }),
      { numRuns: 500 },
    );
  });

  test("model text: no invisibles, no tag or marker in any prefix nor with a line break and a closing tag after it, read NFKC", () => {
    // The whole text normalized at once, not read's one character at a time: a check apart from the reference's.
    const nfkc = (text: string) => text.replace(/\p{Cf}/gu, "").normalize("NFKC");
    fc.assert(
      fc.property(text, (raw) => {
        const model = modelText(raw);
        expect(INVISIBLE.test(model)).toBe(false);
        expect(model).toBe(model.trimEnd());
        for (let end = 0; end <= model.length; end++) {
          const prefix = nfkc(model.slice(0, end));
          expect(TAG.test(prefix)).toBe(false);
          expect(MARKER.test(prefix)).toBe(false);
          // Whatever follows file text in the block starts with a line break and then `<` or `[`.
          expect(TAG.exec(`${prefix}\n</context-file>`)?.index).toBe(prefix.length + 1);
          expect(TAG.test(`${prefix}\n[cut]`)).toBe(false);
        }
      }),
      { numRuns: 300 },
    );
  });

  test("linear time on the worst inputs", () => {
    const inputs = [
      `<${"\u200b".repeat(24_000)}system`,
      `<${"\ufffb".repeat(24_000)}/s${"\u{13430}".repeat(24_000)}ystem`,
      "\uff1c\uff53".repeat(64_000),
      `<${" ".repeat(96_000)}/${"\n".repeat(32_000)}system`,
      "<".repeat(128_000),
      `${"< ".repeat(40_000)}x`,
      "\n".repeat(128_000),
      `${"Instructions ".repeat(9_000)}from`,
    ];
    // Main-thread CPU time: the suite may run on a loaded machine (wall time there failed at 140 ms).
    for (const input of inputs) expect(cpuTimeOf(() => modelText(input))).toBeLessThan(100);
  });
});
