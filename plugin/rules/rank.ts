import { stemmer } from "stemmer";
import { ownCopy } from "../strings.ts";
import { HEADING, rateLines } from "../block/doc.ts";
import { modelText, sanitize } from "../block/escape.ts";

/**
 * Ranking of `include: agent` context files against a user message: BM25F over three fields of each
 * file (its frontmatter description, its headings, its body), with a score normalized so that one
 * fixed threshold means the same thing for a one-word message and for a long one. Pure: no I/O.
 */

/** One `include: agent` file as the ranker sees it. Keep one object per file version: its index is cached under it. */
export interface AgentDoc {
  readonly key: string;
  /** The frontmatter `description`; undefined when the file has none (it then ranks on headings and body). */
  readonly description: string | undefined;
  /** See headingsOf. */
  readonly headings: readonly string[];
  readonly body: string;
}

/** `score` in [0, 1], rounded to 3 decimals (it is recorded in JSON, and the threshold is applied to that value). */
export interface Ranked {
  readonly key: string;
  readonly score: number;
}

export interface RankOptions {
  /** Files attach only when their score is strictly above it (so never with a score of 0); non-finite values mean the default. */
  readonly threshold?: number;
  /** At most this many files attach (floored; Infinity: no limit; NaN: the default). */
  readonly top?: number;
}

/**
 * Calibrated on the fixture of tests/rules/rank.test.ts (12 files of a monorepo, 37 messages), as a
 * corpus, one file at a time, and among 200 more files: every related message scores its file 0.24
 * or more, every unrelated one (sharing at most a body word or two with some file) scores every file
 * 0.17 or less.
 */
export const DEFAULT_THRESHOLD = 0.2;
/** A message seldom concerns more than two subjects, and every file attached costs context. */
export const DEFAULT_TOP = 2;

// ---------------------------------------------------------------------------------------------------
// Terms

/**
 * Function words and chat filler: they say nothing about a subject, and in a corpus of a few files
 * their document frequency is too small for idf alone to silence them. Matched before stemming.
 */
const STOPWORDS: ReadonlySet<string> = new Set(
  (
    "about above after again against all also am an and any are as at be because been before being below between both but by " +
    "can could did do does doing done down during each either else ever every few for from further get gets got had has have " +
    "having he her here hers herself him himself his how however if in into is it its itself just let lets like may me might " +
    "more most much must my myself no nor not now of off on once only or other our ours ourselves out over own per same shall " +
    "she should so some such than that the their theirs them themselves then there these they this those though through thus " +
    "to too under until up upon us very via was we were what when where whether which while who whom whose why will with " +
    "within without would yet you your yours yourself yourselves " +
    // what remains of contractions once the apostrophe splits them ("don't" → "don" "t")
    "don doesn didn isn aren wasn weren hasn haven hadn won wouldn shouldn couldn ll re ve " +
    // chat filler
    "hello hi hey please thanks thank ok okay yes yeah sure help want need know think thing something anything"
  ).split(" "),
);

/**
 * The verbs of any request to a coding agent ("add", "write", "fix", ...), as stems: in a message they
 * name the work, not its subject, and agent files' descriptions use them too ("Writing tests"), so
 * they would tie every request to every file that describes some work.
 */
const REQUEST_VERBS: ReadonlySet<string> = new Set(
  // Porter makes "adding" "ad" and "using" "us"
  ["ad", "add", "chang", "creat", "fix", "made", "make", "run", "updat", "us", "use", "write", "written", "wrote"],
);

/** Longer runs are hashes, base64 or minified code, not words; skipping them also bounds stemming's cost. */
const MAX_TERM_LENGTH = 48;

/** Scripts written without spaces between words: indexed as overlapping character pairs (as Lucene's CJK analyzer does). */
const CJK = /[\p{scx=Han}\p{scx=Hiragana}\p{scx=Katakana}]/u;
const LETTER_MARK_DIGIT = /[\p{L}\p{M}\p{N}]/u;

/** What a character is to the scanner. */
const OTHER = 0;
const WORD_CHAR = 1;
const CJK_CHAR = 2;

/** `_` and `-` join the pieces of one identifier (`snake_case`, `kebab-case`). */
const isJoiner = (code: number) => code === 0x5f || code === 0x2d;

/**
 * The parts of a camelCase piece: `useAuthToken` → use, Auth, Token; `XMLHttpRequest` → XML, Http,
 * Request; a plural acronym (`APIs`) stays whole so that stemming makes it `api`.
 */
const CAMEL_PART = /\p{Lu}{2,}s(?!\p{Ll})|\p{Lu}+(?!\p{Ll})|\p{Lu}?[^\p{Lu}]+/gu;
const NEEDS_CAMEL_SPLIT = /\p{Ll}\p{Lu}|\p{Lu}\p{Lu}\p{Ll}/u;
const ASCII_LETTERS = /^[a-z]+$/;
const DIGITS = /^\p{N}+$/u;
const NON_ASCII = /[^\x00-\x7f]/;

/** The terms of one word. */
interface WordTerms {
  /** The whole of an identifier of several parts, without separators; undefined for a plain word. */
  readonly whole: string | undefined;
  readonly parts: readonly string[];
}

/**
 * What the words of the texts of one build (or one message) are as terms. Files share most of their
 * words, and analyzing a word (stemming above all) costs far more than finding it.
 */
type Analyses = Map<string, WordTerms>;

/**
 * The words of `text` with their counts, in order of first appearance: runs of letters, marks and
 * digits (with the joiners inside an identifier), and runs of CJK characters. Invisible characters
 * are removed first (a zero-width space must not split or hide a word) and the text NFKC-folded (é
 * composed or not, fullwidth letters). Each word is counted before it is analyzed: a text repeats
 * its words, and looking a fresh slice up costs as much as finding it.
 *
 * A loop over char codes, not a Unicode regex: this is most of the cost of indexing, and ASCII
 * (nearly all of it) needs no lookup.
 */
function countWords(text: string): Map<string, number> {
  const clean = sanitize(text);
  const folded = NON_ASCII.test(clean) ? clean.normalize("NFKC") : clean;
  const counts = new Map<string, number>();
  let at = 0;
  while (at < folded.length) {
    const code = folded.codePointAt(at)!;
    const kind = classOf(code);
    let end = at + (code > 0xffff ? 2 : 1);
    if (kind === OTHER) {
      at = end;
      continue;
    }
    while (end < folded.length) {
      const next = folded.codePointAt(end)!;
      if (classOf(next) === kind) {
        end += next > 0xffff ? 2 : 1;
        continue;
      }
      if (kind !== WORD_CHAR || !isJoiner(next)) break;
      let after = end + 1;
      while (after < folded.length && isJoiner(folded.charCodeAt(after))) after++;
      if (after === folded.length || classOf(folded.codePointAt(after)!) !== WORD_CHAR) break;
      end = after;
    }
    const word = folded.slice(at, end);
    counts.set(word, (counts.get(word) ?? 0) + 1);
    at = end;
  }
  return counts;
}

/**
 * A word's terms. A term is a word lower-cased and Porter-stemmed (English only: other scripts are
 * kept as written); an identifier gives its parts and, when it has several, its whole without
 * separators (so `useAuthToken`, `use_auth_token` and `use-auth-token` meet). Stopwords, one-letter
 * words and numbers are no terms: a number names an instance (a line, a port, an issue), not a subject.
 */
function termsOf(word: string, analyses: Analyses): WordTerms {
  let terms = analyses.get(word);
  if (terms === undefined) {
    terms = classOf(word.codePointAt(0)!) === CJK_CHAR ? { whole: undefined, parts: bigrams(word) } : analyze(word);
    analyses.set(word, terms);
  }
  return terms;
}

function classOf(code: number): number {
  if (code < 0x80) {
    const lower = code | 0x20;
    return (code >= 0x30 && code <= 0x39) || (lower >= 0x61 && lower <= 0x7a) ? WORD_CHAR : OTHER;
  }
  const char = String.fromCodePoint(code);
  return CJK.test(char) ? CJK_CHAR : LETTER_MARK_DIGIT.test(char) ? WORD_CHAR : OTHER;
}

function analyze(word: string): WordTerms {
  const parts = word
    .split(/[_-]+/)
    .flatMap((piece) => (NEEDS_CAMEL_SPLIT.test(piece) ? (piece.match(CAMEL_PART) ?? [piece]) : [piece]))
    .map((part) => part.toLowerCase());
  const terms: string[] = [];
  for (const part of parts) {
    const term = STOPWORDS.has(part) ? undefined : termOf(part);
    if (term !== undefined && !REQUEST_VERBS.has(term)) terms.push(term);
  }
  return { whole: parts.length > 1 ? termOf(parts.join("")) : undefined, parts: terms };
}

/** A lower-case word as a term, or undefined when it is none. */
function termOf(word: string): string | undefined {
  if (word.length < 2 || word.length > MAX_TERM_LENGTH || DIGITS.test(word)) return undefined;
  // A word that lower-casing and stemming leave unchanged is still a slice of its file's text.
  return ownCopy(ASCII_LETTERS.test(word) ? stemmer(word) : word);
}

/** `数据库` → 数据, 据库; a lone character is its own term. */
function bigrams(run: string): string[] {
  const chars = Array.from(run);
  if (chars.length === 1) return [ownCopy(run)];
  return chars.slice(1).map((char, i) => chars[i]! + char);
}

// ---------------------------------------------------------------------------------------------------
// Index

/**
 * BM25F's fields: how much one occurrence counts (`weight`), and how much a longer field dilutes it
 * (`b`) relative to a typical agent file's field (`typicalLength`, in terms). The description is the
 * author's own statement of when the file matters; a heading names a section; the body mentions many
 * things in passing, so that one body word alone never attaches a file. Lengths are compared with
 * fixed typical lengths, not with the corpus average as in textbook BM25: the corpus is a handful of
 * files whose average says little, and one added file would change every other file's scores.
 */
const FIELDS = [
  { weight: 3, b: 0.3, typicalLength: 12 }, // description
  { weight: 2, b: 0.5, typicalLength: 20 }, // headings
  { weight: 0.3, b: 0.75, typicalLength: 300 }, // body
] as const;

/** BM25's term-frequency saturation: how fast more occurrences stop counting. */
const K1 = 0.8;

/**
 * Characters indexed per field. Agent files are a few KB, and the opening of a longer one (with all
 * its headings) says what it is about; counting words is nearly all the cost of indexing (about
 * 0.04 ms per KB), and the cap keeps 5,000 files of 128 KB around a second.
 */
const INDEXED_CHARS = 4096;

/** Each term of a doc with its BM25F saturation in [0, 1): its field counts weighted, normalized and summed, then saturated. */
type DocIndex = ReadonlyMap<string, number>;

/** Docs are immutable and a doc's saturations depend on it alone: a ranker rebuilt because one file changed indexes that file only. */
const indexes = new WeakMap<AgentDoc, DocIndex>();
let indexesBuilt = 0;

function indexOf(doc: AgentDoc, analyses: Analyses): DocIndex {
  let index = indexes.get(doc);
  if (index === undefined) {
    index = buildIndex([doc.description ?? "", doc.headings.join("\n"), doc.body], analyses);
    indexes.set(doc, index);
    indexesBuilt++;
  }
  return index;
}

/** Indexes `doc` now (kept under it, as a ranker would): so that a ranker made later does not, all its docs in one task. */
export function prepareAgentDoc(doc: AgentDoc): void {
  indexOf(doc, new Map());
}

/** For tests: how many docs this process has indexed. */
export const agentIndexesBuilt = (): number => indexesBuilt;

function buildIndex(texts: readonly string[], analyses: Analyses): DocIndex {
  const counts = new Map<string, number[]>(); // term → its count in each field
  const lengths = FIELDS.map((_, field) => {
    let length = 0;
    for (const [word, count] of countWords((texts[field] ?? "").slice(0, INDEXED_CHARS))) {
      const { whole, parts } = termsOf(word, analyses);
      for (const term of whole === undefined ? parts : [whole, ...parts]) {
        let known = counts.get(term);
        if (known === undefined) counts.set(term, (known = [0, 0, 0]));
        known[field]! += count;
        length += count;
      }
    }
    return length;
  });
  // Only a field longer than typical dilutes: a three-line body is not more about each of its words.
  const dilutions = FIELDS.map(({ b, typicalLength }, field) => Math.max(1, 1 - b + (b * lengths[field]!) / typicalLength));
  const saturations = new Map<string, number>();
  for (const [term, perField] of counts) {
    const frequency = FIELDS.reduce((sum, { weight }, field) => sum + (weight * perField[field]!) / dilutions[field]!, 0);
    saturations.set(term, frequency / (K1 + frequency));
  }
  return saturations;
}

// ---------------------------------------------------------------------------------------------------
// Ranking

/**
 * Documents added to the corpus in which no term occurs. Real corpora are tiny (often one file), and
 * there plain BM25 idf says nothing (with one file every term it holds has the same low idf); a
 * background of imaginary files keeps a term that occurs in few files informative, whatever their number.
 */
const BACKGROUND_DOCS = 20;

/**
 * How much a message term that no file holds counts against every file, relative to its idf. Such a
 * word is mostly about the user's own code (a name, a value, "invoices"), not about a subject some
 * other file covers, so it weighs less than a word another file holds; but it does weigh: a long
 * message about something else must not attach a file that shares one word with it.
 */
const UNKNOWN_TERM_WEIGHT = 0.25;

/**
 * Added to what a message could score at most, as a share of an unknown word's idf: a message of one
 * or two words carries little evidence, and one word of a file's body must not cover it whole.
 */
const EVIDENCE_PRIOR = 0.5;

/** Query terms considered: a pasted 100 KB log says what it is about well before its 128th distinct term. */
const MAX_QUERY_TERMS = 128;
const MAX_QUERY_CHARS = 16_384;

interface QueryTerm {
  readonly term: string;
  readonly compound: boolean;
}

/** Distinct terms of the message, in order of first appearance, capped. */
function queryTerms(message: string): QueryTerm[] {
  const onlyWhole = new Map<string, boolean>(); // term → whether it came only as an identifier's whole
  const analyses: Analyses = new Map();
  for (const word of countWords(message.slice(0, MAX_QUERY_CHARS)).keys()) {
    const { whole, parts } = termsOf(word, analyses);
    if (whole !== undefined) onlyWhole.set(whole, onlyWhole.get(whole) ?? true);
    for (const part of parts) onlyWhole.set(part, false);
    if (onlyWhole.size >= MAX_QUERY_TERMS) break;
  }
  return [...onlyWhole].slice(0, MAX_QUERY_TERMS).map(([term, compound]) => ({ term, compound }));
}

function inverseDocumentFrequency(containing: number, docs: number): number {
  const total = docs + BACKGROUND_DOCS;
  return Math.log(1 + (total - containing + 0.5) / (containing + 0.5));
}

const round3 = (value: number) => Math.round(value * 1000) / 1000;

/**
 * Ranks a fixed set of agent files against messages. Building one costs the indexing of the docs
 * not seen before (see AgentDoc); ranking costs one map lookup per file and query term.
 */
export class AgentRanker {
  readonly #keys: readonly string[];
  readonly #indexes: readonly DocIndex[];

  constructor(docs: readonly AgentDoc[]) {
    this.#keys = docs.map((doc) => doc.key);
    const analyses: Analyses = new Map();
    this.#indexes = docs.map((doc) => indexOf(doc, analyses));
  }

  /**
   * The files whose score is above the threshold, best first (ties by key), at most `top`.
   *
   * The score is BM25F divided by the most the message could score: each message term counts with
   * its idf, and a file earns that idf times the term's saturation in it. So the score is the share
   * of the message's evidence the file covers, in [0, 1): near 1 when the file holds every term of
   * the message strongly, whatever the message's length. A raw BM25 sum grows with every word of a
   * long message and could not share one threshold with a short one. See UNKNOWN_TERM_WEIGHT and
   * EVIDENCE_PRIOR for the two corrections; the whole of an identifier that no file holds counts
   * nothing, as its parts already stand for it.
   */
  rank(message: string, options: RankOptions = {}): Ranked[] {
    // A file with no evidence never attaches, whatever the options say.
    const threshold = Number.isFinite(options.threshold) ? Math.max(0, options.threshold as number) : DEFAULT_THRESHOLD;
    const top = options.top === undefined || Number.isNaN(options.top) ? DEFAULT_TOP : Math.max(0, Math.floor(options.top));
    if (top === 0 || this.#keys.length === 0) return [];
    const scores = new Float64Array(this.#keys.length);
    let mostPossible = 0;
    for (const { term, compound } of queryTerms(message)) {
      const holders: number[] = [];
      this.#indexes.forEach((index, doc) => {
        if (index.has(term)) holders.push(doc);
      });
      if (holders.length === 0) {
        if (!compound) mostPossible += UNKNOWN_TERM_WEIGHT * inverseDocumentFrequency(0, this.#keys.length);
        continue;
      }
      const idf = inverseDocumentFrequency(holders.length, this.#keys.length);
      mostPossible += idf;
      for (const doc of holders) scores[doc]! += idf * this.#indexes[doc]!.get(term)!;
    }
    if (mostPossible === 0) return [];
    mostPossible += EVIDENCE_PRIOR * inverseDocumentFrequency(0, this.#keys.length);
    const ranked: Ranked[] = [];
    scores.forEach((sum, doc) => {
      const score = round3(sum / mostPossible);
      if (score > threshold) ranked.push({ key: this.#keys[doc]!, score });
    });
    ranked.sort((a, b) => b.score - a.score || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    return ranked.slice(0, top);
  }
}

// ---------------------------------------------------------------------------------------------------
// Headings

/**
 * The ATX headings of a markdown text (`#` to `######` then a blank, at the start of a line, outside
 * fenced code), their text without the markers, in order. Found by the block's own cut rules
 * (plugin/block/doc.ts rates a cut before a heading line outside a fence HEADING), so the two never
 * disagree on what a heading or a fence is; the text is therefore the model's text (invisible
 * characters removed, tags neutralized).
 */
export function headingsOf(markdown: string): string[] {
  const text = modelText(markdown);
  const headings: string[] = [];
  rateLines(text, (start, end, rank) => rank === HEADING && headings.push(headingText(text.slice(start, end))));
  return headings;
}

/** `## Title ##` → `Title`: the opening run, and a closing run of `#` after a blank (CommonMark). */
function headingText(line: string): string {
  let text = line.replace(/^#+/, "").trim();
  let end = text.length;
  while (end > 0 && text[end - 1] === "#") end--;
  if (end === 0 || text[end - 1] === " " || text[end - 1] === "\t") text = text.slice(0, end).trimEnd();
  return text;
}
