export interface Frontmatter {
  /** The text the model sees: the file without its frontmatter block. */
  body: string;
  /** `root: true` stops the walk above this file's directory. */
  root: boolean;
  /** Why the frontmatter could not be parsed, if it could not; the body is still usable. */
  error?: string;
}

const refuse = (language: string) => () => {
  throw new Error(`frontmatter language "${language}" is not allowed: it would execute code`);
};

/**
 * gray-matter ships a `javascript` engine that `eval`s the block (`---js`). Context files are
 * untrusted repository content, so only data formats are allowed; any other language, including
 * the aliases gray-matter maps to code engines, throws and is reported as a frontmatter error.
 */
const SAFE_OPTIONS = {
  engines: {
    javascript: refuse("javascript"),
    js: refuse("js"),
    coffee: refuse("coffee"),
    coffeescript: refuse("coffeescript"),
    cson: refuse("cson"),
  },
};

/**
 * A closed frontmatter block at the very start: `---[lang]` … `---`, each delimiter alone on its
 * line. gray-matter would take an unclosed block (a file that merely opens with a `---` rule) as
 * all frontmatter and drop the whole text, so only a closed block is handed to it.
 */
const BLOCK = /^---[ \t]*[A-Za-z]*[ \t]*\r?\n(?:[\s\S]*?\r?\n)?---[ \t]*(?:\r?\n|$)/;

/**
 * Splits a context file into its body and the frontmatter fields this plugin acts on. gray-matter
 * (with js-yaml) is loaded only once a file has frontmatter: it would cost start-up ~15 ms.
 */
export async function parseFrontmatter(text: string): Promise<Frontmatter> {
  if (!BLOCK.test(text)) return { body: text, root: false };
  try {
    const { default: matter } = await import("gray-matter");
    // Passing options also keeps gray-matter from caching every input string forever.
    const parsed = matter(text, SAFE_OPTIONS);
    const data: unknown = parsed.data;
    // A block that parses to a plain string or number is prose between two rules, not frontmatter.
    if (typeof data !== "object" || data === null || Array.isArray(data)) return { body: text, root: false };
    return { body: parsed.content, root: (data as { root?: unknown }).root === true };
  } catch (error) {
    return {
      body: text.replace(BLOCK, ""),
      root: false,
      error: error instanceof Error ? error.message.split("\n")[0] : String(error),
    };
  }
}
