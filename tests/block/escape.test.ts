import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { escapeAttribute, escapeInline, escapeText, modelText, sanitize } from "../../plugin/block/escape.ts";

/** What a model could read as a tag or OpenCode's marker; a reference written with regexes (fine on short test inputs). */
const GAP = "[\\s\\x85]*";
const TAG = new RegExp(`<${GAP}\\/?${GAP}(?:project-context|context-file|system|instructions)`, "iu");
const MARKER = /^[^\S\n\r\v\f\x85\u2028\u2029]*instructions\s*from[^\S\n\r\v\f\x85\u2028\u2029]*:/imu;
const INVISIBLE = /[\p{Default_Ignorable_Code_Point}\p{Bidi_Control}]/u;

const hostile = fc.constantFrom(
  "<project-context>", "</project-context", "</PROJECT-context >", "< /\n\t system-reminder>", "<\u200b/\u2060system>",
  "<s\u200cystem>", "<\u202eSYSTEM>", "<\u034fsystem>", "<\ufe0fsystem>", "<ſystem>", "</context-file>", "<INSTRUCTIONS>",
  "Instructions from: /x/AGENTS.md\n", "\t iNSTRUCTIONS\u00a0FROM :", "\u2028Instructions from:", "instructions\u200bfrom:",
  " ".repeat(300), "\u200b".repeat(300), "\u3000\u2003", "😀", "\ud83d", "<", "</", "/", "system", "\n", "\r\n", "&lt;",
);
const letters = fc.string({ unit: fc.constantFrom(..."<>/ \n\tsytemSYTEM-IiNnfrom:\u200b\u202e".split("")), maxLength: 30 });
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
    expect(escapeAttribute('a"<b>&\n\u200bc')).toBe("a&quot;&lt;b&gt;&amp; c");
    expect(escapeInline("x\nInstructions from: y <system>")).toBe("x Instructions from: y &lt;system>");
  });

  test("matches the reference exactly: each tag's `<`, each marker's colon, nothing else", () => {
    fc.assert(
      fc.property(text, (raw) => {
        const clean = sanitize(raw);
        let expected = "";
        for (let at = 0; at < clean.length; at++) {
          const lineStart = at === 0 || /[\n\r\v\f\x85\u2028\u2029]/.test(clean[at - 1]!);
          const marker = lineStart ? new RegExp(MARKER.source, "iuy") : undefined;
          if (marker !== undefined && marker.exec(clean.slice(at)) !== null) {
            const colon = at + marker.lastIndex - 1;
            expected += clean.slice(at, colon) + "&#58;";
            at = colon;
            continue;
          }
          expected += clean[at] === "<" && new RegExp(TAG.source, "iuy").test(clean.slice(at)) ? "&lt;" : clean[at];
        }
        expect(escapeText(clean)).toBe(expected);
      }),
      { numRuns: 500 },
    );
  });

  test("model text: no invisibles, no tag or marker in any prefix nor with a line break and a closing tag after it", () => {
    fc.assert(
      fc.property(text, (raw) => {
        const model = modelText(raw);
        expect(INVISIBLE.test(model)).toBe(false);
        expect(model).toBe(model.trimEnd());
        for (let end = 0; end <= model.length; end++) {
          const prefix = model.slice(0, end);
          expect(TAG.test(prefix)).toBe(false);
          expect(MARKER.test(prefix)).toBe(false);
          // Whatever follows file text in the block starts with a line break and then `<` or `[`.
          expect(TAG.exec(`${prefix}\n</context-file>`)?.index).toBe(end + 1);
          expect(TAG.test(`${prefix}\n[cut]`)).toBe(false);
        }
      }),
      { numRuns: 300 },
    );
  });

  test("linear time on the worst inputs", () => {
    const inputs = [
      `<${"\u200b".repeat(24_000)}system`,
      `<${" ".repeat(96_000)}/${"\n".repeat(32_000)}system`,
      "<".repeat(128_000),
      `${"< ".repeat(40_000)}x`,
      "\n".repeat(128_000),
      `${"Instructions ".repeat(9_000)}from`,
    ];
    for (const input of inputs) {
      const started = performance.now();
      modelText(input);
      expect(performance.now() - started).toBeLessThan(100);
    }
  });
});
