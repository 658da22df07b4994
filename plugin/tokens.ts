import type { Measure, Section } from "./render.ts";

/** The first tokens of a text: more than the limit asked for, or all of them (`complete`). */
export interface Prefix {
  tokens: number[];
  complete: boolean;
}

/** Counts and cuts text in real model tokens (gpt-tokenizer, o200k_base). */
export interface Tokenizer {
  count(text: string): number;
  /**
   * The tokens of `text` up to just past `limit`, or all of them if there are no more. Only a
   * prefix about as long as `limit` tokens is tokenized, so asking costs the limit, not the file.
   */
  prefix(text: string, limit: number): Prefix;
  /** The text of the first `maxTokens` of `tokens`, ending at a line break when one is near. */
  decodeHead(tokens: readonly number[], maxTokens: number): string;
}

/**
 * Characters tried per token wanted: a little over the ~4 of prose, so that one pass nearly always
 * holds the limit (a text of longer tokens takes a second, doubled pass).
 */
const CHARS_PER_TOKEN_GUESS = 5;

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
      prefix(text, limit) {
        for (let chars = Math.max(256, (limit + 1) * CHARS_PER_TOKEN_GUESS); ; chars *= 2) {
          const complete = chars >= text.length;
          const tokens = encodePieces(complete ? text : text.slice(0, chars));
          // Cut mid-word, the last token of a slice may differ from the whole text's: it is never used.
          if (complete) return { tokens, complete };
          if (tokens.length > limit + 1) return { tokens: tokens.slice(0, limit + 1), complete };
        }
      },
      decodeHead(tokens, maxTokens) {
        if (maxTokens <= 0) return "";
        const cut = decode(tokens.slice(0, maxTokens));
        // A cut inside a multi-byte character decodes to U+FFFD; drop it rather than show garbage.
        const clean = cut.replace(/\uFFFD+$/, "");
        const lineEnd = clean.lastIndexOf("\n");
        return lineEnd >= clean.length * 0.8 ? clean.slice(0, lineEnd + 1) : clean;
      },
    };
  });
  return loading;
}

/** A section that remembers what was learnt of its tokens (the cache keeps one per file version). */
export interface Measurable extends Section {
  /** Its token count, once known exactly. */
  tokens: number | undefined;
  /** Its first tokens, kept while the whole count is unknown: what a cut is decoded from. */
  prefix: number[] | undefined;
  /** The last cuts made for a token cap, so a re-render after an unrelated change costs nothing. */
  heads: Map<number, string>;
}

/** Short texts counted again and again (section headers, notes): remembered, up to this many. */
const SHORT_TEXT = 256;
const MAX_REMEMBERED = 20_000;
const MAX_HEADS = 4;

/** Measures sections for render and condense, tokenizing each only as far as ever asked. */
export function measurer(tokenizer: Tokenizer): Measure<Measurable> {
  const counted = new Map<string, number>();
  const count = (text: string): number => {
    if (text.length > SHORT_TEXT) return tokenizer.count(text);
    let tokens = counted.get(text);
    if (tokens === undefined) {
      if (counted.size >= MAX_REMEMBERED) counted.clear();
      tokens = tokenizer.count(text);
      counted.set(text, tokens);
    }
    return tokens;
  };
  /** Its count when at most `limit`, else its first tokens (more than `limit`). */
  const learn = (section: Measurable, limit: number): number | number[] => {
    if (section.tokens !== undefined) return section.tokens;
    if (section.prefix !== undefined && section.prefix.length > limit) return section.prefix;
    const { tokens, complete } = tokenizer.prefix(section.text, limit);
    if (!complete) return (section.prefix = tokens);
    section.prefix = undefined;
    return (section.tokens = tokens.length);
  };
  return {
    count,
    tokensUpTo(section, limit) {
      const known = learn(section, limit);
      return typeof known === "number" ? known : limit + 1;
    },
    head(section, maxTokens) {
      let head = section.heads.get(maxTokens);
      if (head === undefined) {
        const known = learn(section, maxTokens);
        if (typeof known === "number" && known <= maxTokens) head = section.text;
        else head = tokenizer.decodeHead(typeof known === "number" ? tokenizer.prefix(section.text, maxTokens).tokens : known, maxTokens);
        // Shares move as files join: remember the last few cuts, not one per share ever used.
        if (section.heads.size >= MAX_HEADS) section.heads.clear();
        section.heads.set(maxTokens, head);
      }
      return head;
    },
  };
}
