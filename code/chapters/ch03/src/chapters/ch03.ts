#!/usr/bin/env node
import { processIO, runCli } from "../cli.js";
import { P03 } from "../core/profiles.js";

process.exitCode = await runCli(process.argv.slice(2), processIO(), {
  name: "ch03",
  title: "agent-tutorial 第 3 章: 副作用之前的权限策略 (边界、规则、审批、审计)",
  profile: P03,
});
