// `npm run format:check`: Prettier's check over the repository, each distinct input once. Files with the same
// bytes, the same resolved options and the same parser format alike, so the snapshots' byte-identical copies are
// checked once and every copy is named when one is off. The files are the ones `prettier --check .` would visit.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as prettier from "prettier";

const repository = fileURLToPath(new URL("../", import.meta.url));
const ignorePath = [join(repository, ".gitignore"), join(repository, ".prettierignore")];

/** Prettier's check, each distinct input once; prints what is off and false when anything is. */
export async function formatCheck(): Promise<boolean> {
  const started = Date.now();
  const listed = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", "-z"], {
    cwd: repository,
    encoding: "utf8",
  })
    .split("\0")
    .filter((path) => path !== "");
  /** options + bytes → the files that share them. */
  const groups = new Map<string, { options: prettier.Options; text: string; files: string[] }>();
  for (const path of listed.sort()) {
    const file = join(repository, path);
    const info = await prettier.getFileInfo(file, { ignorePath });
    if (info.ignored || info.inferredParser === null) continue;
    const options = { ...(await prettier.resolveConfig(file)), parser: info.inferredParser };
    const text = readFileSync(file, "utf8");
    const key = JSON.stringify([options, text]);
    const group = groups.get(key);
    if (group === undefined) groups.set(key, { options: { ...options, filepath: file }, text, files: [path] });
    else group.files.push(path);
  }
  const unformatted: string[] = [];
  for (const group of groups.values()) {
    if (!(await prettier.check(group.text, group.options))) unformatted.push(...group.files);
  }
  for (const path of unformatted.sort()) console.log(`[warn] ${path}`);
  const files = [...groups.values()].reduce((sum, group) => sum + group.files.length, 0);
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  if (unformatted.length > 0)
    console.log(`[warn] Code style issues found in ${unformatted.length} files. Run Prettier with --write to fix.`);
  console.log(`format: ${files} files, ${groups.size} distinct inputs checked (${seconds} s)`);
  return unformatted.length === 0;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.exitCode = (await formatCheck()) ? 0 : 1;
}
