# Monitoring (docs/monitoring.md): deploy/grafana/kolo.json checked
# as a file; a real Prometheus (Debian's package, an instance of the test's
# own) scraping a two-rank kolo-train job, with every query of the dashboard
# evaluated against it; and the time one scrape of a four-rank job takes.
# ctest -L monitoring. Without prometheus or Fashion-MNIST the job tests
# skip (fail under CI=true); a build without LibTorch has no kolo-train and
# only the schema check.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  set(kolo_monitoring_test
    ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/prometheus_test.py
    --dashboard ${PROJECT_SOURCE_DIR}/deploy/grafana/kolo.json
    --prometheus-config ${PROJECT_SOURCE_DIR}/deploy/prometheus/prometheus.yml)
  add_test(NAME Monitoring.DashboardSchema
    COMMAND ${kolo_monitoring_test} schema)
  set_tests_properties(Monitoring.DashboardSchema PROPERTIES
    TIMEOUT 30 LABELS monitoring)

  if(TARGET kolorun AND TARGET kolo-train)
    set(kolo_monitoring_job
      --kolorun $<TARGET_FILE:kolorun> --kolo-train $<TARGET_FILE:kolo-train>
      --data-dir /usr/share/datasets/fashion-mnist)
    add_test(NAME Monitoring.PrometheusScrapesJobAndDashboardQueries
      COMMAND ${kolo_monitoring_test} dashboard ${kolo_monitoring_job})
    add_test(NAME Monitoring.ScrapeOfFourRanksUnderHalfASecond
      COMMAND ${kolo_monitoring_test} scrape-time ${kolo_monitoring_job})
    # 77: a prerequisite is missing; the test's output names it.
    set_tests_properties(Monitoring.PrometheusScrapesJobAndDashboardQueries
      Monitoring.ScrapeOfFourRanksUnderHalfASecond PROPERTIES
      TIMEOUT 180 SKIP_RETURN_CODE 77 LABELS monitoring)
  endif()
endif()
