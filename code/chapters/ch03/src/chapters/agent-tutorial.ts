#!/usr/bin/env node
import { processIO, runCli } from "../cli.js";
import { profileForChapter, UnknownChapterError } from "../core/profiles.js";

// The unified entry: `agent-tutorial run --chapter N [options]` runs this snapshot's CLI with chapter N's profile.
const USAGE = "用法: npm run agent-tutorial -- run --chapter <1|2|3> [选项]; 选项见 --help";

process.exitCode = await main(process.argv.slice(2));

async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === "--help" || command === "-h" || command === undefined) {
    process.stdout.write(`${USAGE}\n`);
    return command === undefined ? 2 : 0;
  }
  const at = rest.indexOf("--chapter");
  const value = at === -1 ? undefined : rest[at + 1];
  if (command !== "run" || value === undefined || !/^\d+$/.test(value)) {
    process.stderr.write(`配置错误: ${USAGE}\n`);
    return 2;
  }
  let profile;
  try {
    profile = profileForChapter(Number(value));
  } catch (error) {
    if (!(error instanceof UnknownChapterError)) throw error;
    process.stderr.write(`配置错误: ${error.message}\n`);
    return 2;
  }
  const options = [...rest.slice(0, at), ...rest.slice(at + 2)];
  return runCli(options, processIO(), {
    name: `agent-tutorial -- run --chapter ${value}`,
    title: `agent-tutorial: 第 ${value} 章的配置`,
    profile,
  });
}
