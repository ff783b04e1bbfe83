#include <catch2/catch.hpp>

#include "common/error.h"
#include "runtime/external_launch.h"

using hvd::runtime::detectExternalLaunch;
using Env = std::map<std::string, std::string>;

TEST_CASE("srun job steps give rank, size and placement, with uneven nodes") {
  // 5 tasks on 2 nodes as 3 + 2; this is the second task of node 1 (global rank 4).
  Env env{{"SLURM_PROCID", "4"},
          {"SLURM_STEP_NUM_TASKS", "5"},
          {"SLURM_LOCALID", "1"},
          {"SLURM_NODEID", "1"},
          {"SLURM_STEP_TASKS_PER_NODE", "3,2"},
          {"SLURM_JOB_ID", "77"},
          {"SLURM_STEP_ID", "0"},
          {"SLURMD_NODENAME", "gpu02"},
          {"SLURM_TASKS_PER_NODE", "4(x2)"}};
  auto e = detectExternalLaunch(env);
  REQUIRE(e);
  CHECK(e->launcher == "Slurm");
  CHECK(e->params == Env{{"HVD_RANK", "4"},
                         {"HVD_SIZE", "5"},
                         {"HVD_LOCAL_RANK", "1"},
                         {"HVD_LOCAL_SIZE", "2"},
                         {"HVD_CROSS_RANK", "1"},
                         {"HVD_CROSS_SIZE", "2"},
                         {"HVD_JOB_ID", "slurm-77.0"},
                         {"HVD_RENDEZVOUS_PORT", "21232"},  // 20000 + 16 * 77 + 0
                         {"HVD_HOSTNAME", "gpu02"}});
  Env third_env = env;
  for (auto [name, value] : {std::pair<const char*, const char*>{"SLURM_LOCALID", "2"},
                             {"SLURM_PROCID", "2"},
                             {"SLURM_NODEID", "0"}})
    third_env[name] = std::string(value);
  auto third = detectExternalLaunch(third_env);
  CHECK(third->params.at("HVD_CROSS_RANK") == "0");
  CHECK(third->params.at("HVD_CROSS_SIZE") == "1");  // only node 0 has a local rank 2
}

TEST_CASE("srun ranks derive the rendezvous: the step's first node, a port per job step") {
  Env env{{"SLURM_PROCID", "1"},
          {"SLURM_STEP_NUM_TASKS", "2"},
          {"SLURM_LOCALID", "0"},
          {"SLURM_NODEID", "1"},
          {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"},
          {"SLURM_STEP_NODELIST", "gpu[07-08]"},
          {"SLURM_JOB_ID", "123456"},
          {"SLURM_STEP_ID", "3"}};
  auto step3 = detectExternalLaunch(env);
  CHECK(step3->params.at("HVD_RENDEZVOUS_ADDR") == "gpu07");
  CHECK(step3->params.at("HVD_RENDEZVOUS_PORT") == "25299");  // 20000 + (16 * 123456 + 3) % 10^4
  env["SLURM_STEP_ID"] = "4";  // a concurrent step of the job: its own port
  CHECK(detectExternalLaunch(env)->params.at("HVD_RENDEZVOUS_PORT") == "25300");
  CHECK_FALSE(step3->params.count("HVD_SECRET"));  // nothing in a step's variables is secret
  env["SLURM_JOB_ID"] = "x1";
  REQUIRE_THROWS_WITH(detectExternalLaunch(env), Catch::Contains("SLURM_JOB_ID"));
}

TEST_CASE("the batch script and hvdrun's ranks are not mistaken for srun ranks") {
  CHECK_FALSE(detectExternalLaunch({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}}));
  CHECK_FALSE(detectExternalLaunch({{"HVD_RANK", "1"}, {"OMPI_COMM_WORLD_RANK", "0"}}));
  CHECK_FALSE(detectExternalLaunch({}));
}

TEST_CASE("mpirun (Open MPI) and mpiexec (MPICH) ranks are placed in blocks per node") {
  auto ompi = detectExternalLaunch({{"OMPI_COMM_WORLD_RANK", "5"},
                                    {"OMPI_COMM_WORLD_SIZE", "8"},
                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                    {"SLURM_PROCID", "0"},
                                    {"SLURM_STEP_NUM_TASKS", "1"}});
  REQUIRE(ompi);
  CHECK(ompi->launcher == "Open MPI");
  CHECK(ompi->params.at("HVD_CROSS_RANK") == "1");
  CHECK(ompi->params.at("HVD_CROSS_SIZE") == "2");
  CHECK_FALSE(ompi->params.count("HVD_RENDEZVOUS_ADDR"));  // rank 0's host is not in them
  auto withJob = detectExternalLaunch({{"OMPI_COMM_WORLD_RANK", "0"},
                                       {"OMPI_COMM_WORLD_SIZE", "2"},
                                       {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                                       {"OMPI_MCA_ess_base_jobid", "409075713"},
                                       {"OMPI_MCA_orte_precondition_transports", "6089cb09-d2a0"}});
  CHECK(withJob->params.at("HVD_RENDEZVOUS_PORT") == "25713");
  CHECK(withJob->params.at("HVD_SECRET") == "ompi-6089cb09-d2a0");
  auto mpich = detectExternalLaunch(
      {{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "2"}, {"MPI_LOCALNRANKS", "3"}});
  CHECK(mpich->params.at("HVD_LOCAL_SIZE") == "3");
  REQUIRE_THROWS_WITH(detectExternalLaunch({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}}),
                      Catch::Contains("MPI_LOCALRANKID is not"));
  REQUIRE_THROWS_WITH(detectExternalLaunch({{"OMPI_COMM_WORLD_RANK", "4"},
                                            {"OMPI_COMM_WORLD_SIZE", "4"},
                                            {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}}),
                      Catch::Contains("rank 4 is not below OMPI_COMM_WORLD_SIZE=4"));
  REQUIRE_THROWS_WITH(detectExternalLaunch({{"SLURM_PROCID", "0"},
                                            {"SLURM_STEP_NUM_TASKS", "2"},
                                            {"SLURM_LOCALID", "0"},
                                            {"SLURM_NODEID", "3"},
                                            {"SLURM_STEP_TASKS_PER_NODE", "2"}}),
                      Catch::Contains("SLURM_NODEID=3"));
}
