import { describe, expect, test } from "bun:test";
import { parseFrontmatter } from "../plugin/frontmatter.ts";

describe("parseFrontmatter", () => {
  test("YAML frontmatter is taken out of the body, root: true is read", async () => {
    expect(await parseFrontmatter("---\nroot: true\nowner: x\n---\n# Body\n")).toEqual({ body: "# Body\n", root: true });
    expect(await parseFrontmatter("---\nroot: yes please\n---\nb")).toEqual({ body: "b", root: false });
  });

  test("JSON frontmatter is parsed too", async () => {
    expect(await parseFrontmatter('---json\n{ "root": true }\n---\n# Body\n')).toEqual({ body: "# Body\n", root: true });
  });

  test("a file without frontmatter is all body, including one that merely opens with a --- rule", async () => {
    expect(await parseFrontmatter("# Title\n---\nx")).toEqual({ body: "# Title\n---\nx", root: false });
    expect(await parseFrontmatter("---\nno closing delimiter\n")).toEqual({ body: "---\nno closing delimiter\n", root: false });
  });

  test("invalid YAML: the body is still used and the error reported", async () => {
    const parsed = await parseFrontmatter("---\nroot: [unclosed\n---\n# Body\n");
    expect(parsed.body).toBe("# Body\n");
    expect(parsed.root).toBe(false);
    expect(parsed.error).toBeString();
  });

  test("code-running frontmatter engines are never run", async () => {
    const marker = "__frontmatterRan";
    for (const lang of ["js", "javascript", "coffee", "JS"]) {
      const parsed = await parseFrontmatter(`---${lang}\n{ root: (globalThis.${marker} = true) }\n---\n# Body\n`);
      expect(parsed.body).toBe("# Body\n");
      expect(parsed.root).toBe(false);
      expect(parsed.error).toContain("not");
    }
    expect((globalThis as Record<string, unknown>)[marker]).toBeUndefined();
  });

  test("YAML tags that would build code are refused", async () => {
    const parsed = await parseFrontmatter('---\nroot: !!js/function "function () { globalThis.__yamlRan = true }"\n---\nb');
    expect(parsed.body).toBe("b");
    expect((globalThis as Record<string, unknown>).__yamlRan).toBeUndefined();
  });
});

describe("what is not frontmatter", () => {
  test("prose between two rules, and a rule with a title, are kept as text", async () => {
    const prose = "---\nAlways run tests before committing.\n---\n# Rules\n";
    expect(await parseFrontmatter(prose)).toEqual({ body: prose, root: false });
    const titled = "--- Overview ---\nImportant: never push to main\n---\n# Rules\n";
    expect(await parseFrontmatter(titled)).toEqual({ body: titled, root: false });
  });
});
