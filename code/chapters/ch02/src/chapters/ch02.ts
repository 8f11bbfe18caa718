#!/usr/bin/env node
import { processIO, runCli } from "../cli.js";
import { P02 } from "../core/profiles.js";

process.exitCode = await runCli(process.argv.slice(2), processIO(), {
  name: "ch02",
  title: "agent-tutorial 第 2 章: 工具注册表、五个工具与工作区路径安全",
  profile: P02,
});
