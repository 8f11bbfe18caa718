// Unified diff of two chapter snapshots (src/, tests/, demo/ and the package files): `npm run diff -- ch02 ch03`.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const chapters = fileURLToPath(new URL("../code/chapters/", import.meta.url));
const [from, to, ...rest] = process.argv.slice(2);

if (from === undefined || to === undefined || rest.length > 0 || !/^ch\d\d$/.test(from) || !/^ch\d\d$/.test(to)) {
  console.error("usage: npm run diff -- chNN chMM   (for example: npm run diff -- ch02 ch03)");
  process.exit(2);
}
for (const name of [from, to]) {
  if (!existsSync(`${chapters}${name}`)) {
    console.error(`no snapshot code/chapters/${name}`);
    process.exit(2);
  }
}

let differs = false;
for (const part of ["package.json", "tsconfig.json", "tsconfig.build.json", "src", "tests", "demo"]) {
  // git diff --no-index works on any two folders and shows renames; exit 1 only means "they differ".
  const result = spawnSync(
    "git",
    [
      "diff",
      "--no-index",
      "--find-renames",
      `--color=${process.stdout.isTTY ? "always" : "never"}`,
      `${from}/${part}`,
      `${to}/${part}`,
    ],
    { cwd: chapters, stdio: "inherit" },
  );
  if (result.error) {
    console.error(`git is needed for the diff: ${result.error.message}`);
    process.exit(2);
  }
  if (result.status === 1) differs = true;
  else if (result.status !== 0) process.exit(result.status ?? 2);
}
if (!differs) console.log(`${from} and ${to} are the same`);
