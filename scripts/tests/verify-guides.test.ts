import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { createdNames, docProblems, newestDemoChapter } from "../doc-rules.js";
import { docFiles, guideProblems, unignoredNames } from "../verify-guides.js";

const counts = new Map([
  ["tests/a.test.ts", 3],
  ["tests/b.test.ts", 4],
  ["tests/c.test.ts", 2],
]);

const guide = (total: number, a: number, pair: number): string =>
  [
    `书中 30 个测试，本仓库 ${total} 个: …`,
    "",
    "| 文件 | 个数 | 证明什么 |",
    "| --- | --- | --- |",
    `| \`a.test.ts\` (书) | ${a} | … |`,
    `| \`b.test.ts\`、\`c.test.ts\` | ${pair} | … |`,
    "| 其余 | 99 | no file named, not checked |",
    "",
    "| 文件 | 个数 | 变红的测试 |",
    "| --- | --- | --- |",
    "| `b.test.ts` | 1 | an experiment's red tests, not a count of the gate |",
  ].join("\n");

describe("verify:guides", () => {
  it("accepts a guide whose total and per-file counts equal the gate's", () => {
    expect(guideProblems("ch.md", guide(9, 3, 6), counts)).toEqual([]);
  });

  it("names every stated count that differs: the total, one file, a sum of files, and the table's sum", () => {
    expect(guideProblems("ch.md", guide(10, 2, 5), counts)).toEqual([
      "ch.md: says 本仓库 10 个, the gate has 9",
      "ch.md:5: says 2 for a.test.ts, the gate has 3",
      "ch.md:6: says 5 for b.test.ts, c.test.ts, the gate has 6",
      "ch.md:3: the 个数 table's rows add up to 7, the guide says 本仓库 10 个",
    ]);
  });

  it("refuses a 个数 table whose rows do not add up to the stated total: a file left out, or named twice", () => {
    const without = guide(9, 3, 6).replace("`b.test.ts`、`c.test.ts` | 6", "`b.test.ts` | 4");
    expect(guideProblems("ch.md", without, counts)).toEqual([
      "ch.md:3: the 个数 table's rows add up to 7, the guide says 本仓库 9 个 (the gate's files it does not name: c.test.ts)",
    ]);
    const twice = `${guide(9, 3, 6)}\n`.replace("| 其余 |", "| `c.test.ts` | 2 |\n| 其余 |");
    expect(guideProblems("ch.md", twice, counts)).toEqual([
      "ch.md:3: the 个数 table's rows add up to 11, the guide says 本仓库 9 个 (named twice: c.test.ts)",
    ]);
  });

  it("refuses a row that names a test file the gate does not have", () => {
    const stale = "| 文件 | 个数 |\n| --- | --- |\n| `gone.test.ts` | 5 |";
    expect(guideProblems("ch.md", stale, counts)).toEqual([
      "ch.md:3: names gone.test.ts, which the gate does not have",
    ]);
  });
});

describe("verify:guides writing rules (chapters/*.md, README.md, docs/*.md)", () => {
  const scripts = new Set(["ch01", "diff", "test:ch03", "verify:guides"]);
  const fence = (language: string, ...lines: string[]): string => ["```" + language, ...lines, "```"].join("\n");

  it("accepts a doc that names functions, runs root scripts, cites only other trackers and silences piped npm runs", () => {
    const doc = [
      "`isInsideWorkspace` 在 `src/core/safe-path.ts` 里；固定入口是 `npm run chNN`。",
      "见 [npm/cli#4903](https://github.com/npm/cli/issues/4903) 和 https://github.com/npm/cli/issues/4903。",
      "`npm run -s ch01 -- --demo -q | Set-Content answer.txt`, `npm run test:ch03`, `npm -w code/chapters/ch03 run build`",
      fence(
        "powershell",
        "npm run -s diff -- ch02 ch03 > ch03.patch",
        'npm run ch01 -- --prompt "a | b > c"   # a quoted | is no pipe',
        "npm run diff -- ch02 ch03      # 第 3 章 | 改了什么",
        "npm --silent run verify:guides 2>&1 | Tee-Object out.txt",
        "echo y | npm run ch01 -- --prompt x",
      ),
      fence("bash", "cd code/chapters/ch03", "npm run build"),
      fence(
        "text",
        "用法: npm run ch01 -- --prompt <text> [选项]",
        "命令 (第 1 行, 共 N 行): x",
        "at loop.ts:48:5 | x",
      ),
      "终端里显示 `命令 (第 1 行, 共 N 行)`。",
    ].join("\n");
    expect(docProblems("doc.md", doc, scripts)).toEqual([]);
  });

  it("refuses line numbers in every form: L48–L56, L48-L56, a file's :48, #L48, 第 48 行, line 48", () => {
    const doc = [
      "`isInsideWorkspace` (L48–L56) 和 (L7-L9)",
      "见 `src/core/loop.ts:48` 与 `loop.ts:10-12`",
      "见 [loop.ts](../code/chapters/ch03/src/core/loop.ts#L48)",
      "在 `loop.ts` 的第 48 行，或 lines 3–5",
      fence("ts", "const L1 = 1; // a code block is not checked"),
    ].join("\n");
    const advice = "name the function, type or test instead";
    expect(docProblems("doc.md", doc, scripts)).toEqual([
      `doc.md:1: cites line numbers (L48–L56, L7-L9); ${advice}`,
      `doc.md:2: cites line numbers (.ts:48, .ts:10-12); ${advice}`,
      `doc.md:3: cites line numbers (.ts#L48); ${advice}`,
      `doc.md:4: cites line numbers (第 48 行, lines 3–5); ${advice}`,
    ]);
  });

  it("refuses an npm run <name> that the root package.json does not have, in prose, inline code and blocks", () => {
    const doc = [
      "先 `npm run test:ch09`，再 npm run gate。",
      fence("powershell", "npm run -s demo", "npm run ch01"),
    ].join("\n");
    expect(docProblems("doc.md", doc, scripts)).toEqual([
      "doc.md:1: npm run test:ch09 is not a script of the root package.json",
      "doc.md:1: npm run gate is not a script of the root package.json",
      "doc.md:3: npm run demo is not a script of the root package.json",
    ]);
  });

  it("refuses SPEC, § sections and the word issue, but not a GitHub URL or an owner/repo#N reference", () => {
    const doc = [
      "这在 SPEC §10 里规定，见 SPEC.md。",
      "本 issue 修好了；这些 Issues 也是。",
      "npm 的已知问题 npm/cli#4903（https://github.com/npm/cli/issues/4903）。",
    ].join("\n");
    const advice = "say what the reader needs instead";
    expect(docProblems("doc.md", doc, scripts)).toEqual([
      `doc.md:1: mentions SPEC ("SPEC"); ${advice}`,
      `doc.md:1: mentions SPEC ("SPEC"); ${advice}`,
      `doc.md:1: mentions a § section ("§10"); ${advice}`,
      `doc.md:2: mentions an issue ("issue"); ${advice}`,
      `doc.md:2: mentions an issue ("Issues"); ${advice}`,
    ]);
  });

  it("refuses a piped or redirected npm run without -s: |, >, 2>, Out-File, Tee-Object, over continued lines and in inline code", () => {
    const doc = [
      fence(
        "bash",
        "npm run diff -- ch02 ch03 | less -R",
        "npm run diff -- ch02 ch03 > ch03.patch",
        "npm run ch01 -- --demo 2> errors.txt",
        "npm run ch01 -- --demo \\",
        "  --quiet | tee answer.txt",
      ),
      fence(
        "powershell",
        "npm run ch01 -- --demo | Out-File answer.txt",
        "npm run ch01 -- --demo -q `",
        "  | Tee-Object answer.txt",
        "npm run diff -- ch01 ch02 -s | less   # -s after -- is the script's, not npm's",
      ),
      "只看回答：`npm run ch01 -- --prompt '…' 2>$null`。",
    ].join("\n");
    const problem = (line: number, command: string): string =>
      `doc.md:${line}: pipes or redirects the output of \`${command}\`; write npm run -s`;
    expect(docProblems("doc.md", doc, scripts)).toEqual([
      problem(2, "npm run diff -- ch02 ch03"),
      problem(3, "npm run diff -- ch02 ch03"),
      problem(4, "npm run ch01 -- --demo"),
      problem(5, "npm run ch01 -- --demo --quiet"),
      problem(9, "npm run ch01 -- --demo"),
      problem(10, "npm run ch01 -- --demo -q"),
      problem(12, "npm run diff -- ch01 ch02 -s"),
      problem(14, 'npm run ch01 -- --prompt ""'),
    ]);
  });

  it("refuses half-width punctuation in Chinese prose, but not in code, program output, link targets or O(n)", () => {
    const doc = [
      "测试通过, 只说明一件事; 对吗? 对!",
      '审批 (approval) 与 (终端) 不同: 它"默认拒绝"。',
      "见 [安全](../docs/security.md) 里的 O(n) 一节，和 `运行失败: 模型出错`。",
      fence("text", "警告: .env 在工作区里, 模型可以读到"),
    ].join("\n");
    const problem = (line: number, found: string, fullWidth: string): string =>
      `doc.md:${line}: half-width punctuation in Chinese prose ("${found}"); write ${fullWidth}`;
    expect(docProblems("doc.md", doc, scripts)).toEqual([
      problem(1, "过,", "，；：？！"),
      problem(1, "事;", "，；：？！"),
      problem(1, "吗?", "，；：？！"),
      problem(1, "对!", "，；：？！"),
      problem(2, "同:", "，；：？！"),
      problem(2, "(终端)", "（）"),
      problem(2, '"默认拒绝"', "“”"),
    ]);
  });

  it("docFiles lists chapters/*.md, README.md and docs/*.md", () => {
    const files = docFiles(fileURLToPath(new URL("../../", import.meta.url)));
    expect(files).toContain("chapters/ch01.md");
    expect(files).toContain("README.md");
    expect(files).toContain("docs/snapshots.md");
    expect(files.every((file) => /^(chapters\/[^/]+|README|docs\/[^/]+)\.md$/.test(file))).toBe(true);
  });
});

describe("npm run demo belongs to the newest chapter", () => {
  const scripts = new Set(["demo", "demo:ch05", "demo:ch08"]);

  it("reads the newest chapter from the root package.json's demo script", () => {
    expect(newestDemoChapter({ demo: "tsx code/chapters/ch08/src/chapters/ch08.ts --demo" })).toBe("ch08");
    expect(newestDemoChapter({})).toBeUndefined();
  });

  it("an older chapter's guide that names a bare npm run demo is refused; demo:chNN, and the newest guide, are not", () => {
    const doc = [
      "`npm run demo` 演示第 5 章。",
      "```powershell",
      "$null | npm run -s demo",
      "npm run demo:ch05",
      "```",
    ];
    expect(docProblems("chapters/ch05.md", doc.join("\n"), scripts, "ch08")).toEqual([
      "chapters/ch05.md:1: names npm run demo, which plays ch08's demo; write npm run demo:ch05",
      "chapters/ch05.md:3: names npm run demo, which plays ch08's demo; write npm run demo:ch05",
    ]);
    expect(docProblems("chapters/ch08.md", doc.join("\n"), scripts, "ch08")).toEqual([]);
    expect(docProblems("README.md", doc.join("\n"), scripts, "ch08")).toEqual([]);
  });
});

describe("what a guide has a reader make in the repository root is git-ignored", () => {
  const guide = [
    "加 `--transcript run.json` 看历史；`mkdir -p` 的那一行。",
    "```powershell",
    "New-Item -ItemType Directory -Force playground\\skills | Out-Null",
    "New-Item -ItemType Directory exp-ws, exp-outside",
    "npm run ch06 -- --workspace code --prompt x",
    "npm run ch02 -- --replay rec.json --workspace ./replay-ws/",
    "git worktree add ../exp-ch05 HEAD",
    "```",
    "```bash",
    "mkdir -p code/scratch && cp a b",
    "```",
    "```text",
    "mkdir shown-as-output",
    "```",
    "`--workspace <一个空文件夹>`、`--workspace /`",
  ].join("\n");

  it("reads --transcript files and --workspace, New-Item -ItemType Directory and mkdir folders from shell blocks and inline code", () => {
    expect(createdNames(guide).map((name) => `${name.line}:${name.path}${name.folder ? "/" : ""}`)).toEqual([
      "1:run.json",
      "3:playground/skills/",
      "4:exp-ws/",
      "4:exp-outside/",
      "5:code/",
      "6:replay-ws/",
      "10:code/scratch/",
    ]);
  });

  const repo = mkdtempSync(join(tmpdir(), "agent-tutorial-ignored-"));
  afterAll(() => rmSync(repo, { recursive: true, force: true }));

  it("a name the root .gitignore leaves out is refused with its guide and line until .gitignore lists it; a tracked folder (code) is not", () => {
    execFileSync("git", ["init", "-q"], { cwd: repo });
    mkdirSync(join(repo, "chapters"));
    mkdirSync(join(repo, "code"));
    writeFileSync(join(repo, "code", "kept.ts"), "");
    execFileSync("git", ["add", "code/kept.ts"], { cwd: repo });
    writeFileSync(join(repo, "chapters", "ch05.md"), guide);
    writeFileSync(join(repo, ".gitignore"), "playground/\nexp-ws/\nexp-outside/\nreplay-ws/\n");
    expect(unignoredNames(repo, ["chapters/ch05.md"])).toEqual([
      "chapters/ch05.md:1: makes run.json in the repository, which the root .gitignore does not ignore (git status would show it)",
      "chapters/ch05.md:10: makes code/scratch/ in the repository, which the root .gitignore does not ignore (git status would show it)",
    ]);
    writeFileSync(
      join(repo, ".gitignore"),
      "playground/\nexp-ws/\nexp-outside/\nreplay-ws/\nrun.json\ncode/scratch/\n",
    );
    expect(unignoredNames(repo, ["chapters/ch05.md"])).toEqual([]);
  });

  it("the guides and README of this repository make no name git would show", () => {
    const root = fileURLToPath(new URL("../../", import.meta.url));
    const guides = docFiles(root).filter((file) => file.startsWith("chapters/") || file === "README.md");
    expect(unignoredNames(root, guides)).toEqual([]);
  });
});
