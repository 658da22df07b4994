/** Counts and cuts text in real model tokens (gpt-tokenizer, o200k_base). */
export interface Tokenizer {
  count(text: string): number;
  /**
   * The count of `text` when it is at most `limit`; otherwise some number above `limit`. Only a
   * prefix about as long as `limit` tokens is tokenized, so asking costs the limit, not the file.
   */
  countUpTo(text: string, limit: number): number;
  /** The longest beginning of `text` within `maxTokens` tokens, ending at a line break when one is near. */
  head(text: string, maxTokens: number): string;
}

/** Comfortably more characters than one token holds on average (about 4): a prefix this long holds the limit. */
const CHARS_PER_TOKEN_BOUND = 8;

/**
 * By default gpt-tokenizer throws on text that looks like a special token (`<|endoftext|>`). A
 * context file is plain text to the model, so such text is counted as plain text. Building these
 * options costs time on every call, so they are used only when the text could need them.
 */
const PLAIN_TEXT = { allowedSpecial: new Set<string>(), disallowedSpecial: new Set<string>() };
const optionsFor = (text: string) => (text.includes("<|") ? PLAIN_TEXT : undefined);

/**
 * BPE merging is quadratic in the length of one pre-token, and a run without whitespace is one
 * pre-token: 128 KB of `a` (or of CJK text without punctuation) takes gpt-tokenizer ~30 s, all of it
 * blocking OpenCode's process. Such runs are tokenized in slices of this many characters instead,
 * which changes their count by at most a token a slice; ordinary text never has a run this long.
 */
const MAX_RUN = 256;
const LONG_RUN = new RegExp(`\\S{${MAX_RUN * 2},}`);
const RUN_SLICE = new RegExp(`(\\S{${MAX_RUN}})`);

/** `text` in pieces no BPE run of which is longer than MAX_RUN, or whole when it has no long run. */
const piecesOf = (text: string): string[] => (LONG_RUN.test(text) ? text.split(RUN_SLICE).filter((piece) => piece !== "") : [text]);

let loading: Promise<Tokenizer> | undefined;

/**
 * gpt-tokenizer takes ~300 ms to load its ranks, far more than plugin start-up may cost, so it is
 * loaded on first use (the plugin starts the load at start-up without waiting for it).
 */
export function loadTokenizer(): Promise<Tokenizer> {
  loading ??= import("gpt-tokenizer").then(({ countTokens, encode, decode }) => {
    const count = (text: string) => {
      let total = 0;
      for (const piece of piecesOf(text)) total += countTokens(piece, optionsFor(piece));
      return total;
    };
    const encodePieces = (text: string) => piecesOf(text).flatMap((piece) => encode(piece, optionsFor(piece)));
    return {
      count,
      countUpTo(text, limit) {
        for (let chars = Math.max(256, (limit + 1) * CHARS_PER_TOKEN_BOUND); ; chars *= 2) {
          if (chars >= text.length) return count(text);
          const prefixCount = count(text.slice(0, chars));
          if (prefixCount > limit) return prefixCount;
        }
      },
      head(text, maxTokens) {
        if (maxTokens <= 0) return "";
        for (let chars = Math.max(256, (maxTokens + 1) * CHARS_PER_TOKEN_BOUND); ; chars *= 2) {
          const slice = chars >= text.length ? text : text.slice(0, chars);
          const tokens = encodePieces(slice);
          if (tokens.length <= maxTokens) {
            if (slice === text) return text;
            continue;
          }
          const cut = decode(tokens.slice(0, maxTokens));
          // A cut inside a multi-byte character decodes to U+FFFD; drop it rather than show garbage.
          const clean = cut.replace(/\uFFFD+$/, "");
          const lineEnd = clean.lastIndexOf("\n");
          return lineEnd >= clean.length * 0.8 ? clean.slice(0, lineEnd + 1) : clean;
        }
      },
    };
  });
  return loading;
}
