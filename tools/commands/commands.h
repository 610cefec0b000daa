/* Subcommands of the prefixcl tool; each returns the process exit status. */
#ifndef PFX_TOOLS_COMMANDS_H
#define PFX_TOOLS_COMMANDS_H

int cmd_devices(int argc, char **argv);
int cmd_kernel_configs(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_attn_map(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_pretrain(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_gemm_tune(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_experiment(int argc, char **argv);
int cmd_export(int argc, char **argv);

#endif
